#pragma once
// Typed exceptions of the engine. The engine never aborts or exits: it throws one of these with a
// message a user understands; the app layer turns it into a dialog or a non-zero exit code.
#include <stdexcept>
#include <string>

namespace towers::engine {

// Base of every engine error.
class Error : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

// A caller passed something invalid: mismatched shapes, a zero size, an unknown name.
class InvalidArgument : public Error
{
public:
    using Error::Error;
};

// A shape does not fit what an op or layer expects.
class ShapeError : public InvalidArgument
{
public:
    using InvalidArgument::InvalidArgument;
};

// A requested name (model, backend, parameter) does not exist.
class UnknownName : public InvalidArgument
{
public:
    using InvalidArgument::InvalidArgument;
};

// The op or dtype is not supported by the chosen backend.
class Unsupported : public Error
{
public:
    using Error::Error;
};

// A backend library (oneDNN, cuDNN, ...) reported a failure.
class BackendError : public Error
{
public:
    using Error::Error;
};

// A file could not be read or written, or its content is not what was expected.
class IoError : public Error
{
public:
    using Error::Error;
};

// Training diverged: the loss became NaN or infinite ("model diverged with loss = NaN at step 12").
// No checkpoint of the diverged state is written; the last good one is kept.
class DivergedError : public Error
{
public:
    using Error::Error;
};

// A collective operation (gradient averaging, broadcast) was abandoned because another
// participant failed; the participant's own error is the one to report.
class CollectiveAborted : public Error
{
public:
    using Error::Error;
};

} // namespace towers::engine
