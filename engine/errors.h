#pragma once
// Typed exceptions of the engine. The engine never aborts or exits: it throws one of these with a
// message a user understands; the app layer turns it into a dialog or a non-zero exit code.
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

// Exceptions cross the boundary of the GPU backend plugin, which is built with hidden visibility:
// their type information stays visible so that a catch in the program matches a throw in the
// plugin.
#define TOWERS_VISIBLE __attribute__((visibility("default")))

namespace towers::engine {

// Base of every engine error.
class TOWERS_VISIBLE Error : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

// A caller passed something invalid: mismatched shapes, a zero size, an unknown name.
class TOWERS_VISIBLE InvalidArgument : public Error
{
public:
    using Error::Error;
};

// A shape does not fit what an op or layer expects.
class TOWERS_VISIBLE ShapeError : public InvalidArgument
{
public:
    using InvalidArgument::InvalidArgument;
};

// A requested name (model, backend, parameter) does not exist.
class TOWERS_VISIBLE UnknownName : public InvalidArgument
{
public:
    using InvalidArgument::InvalidArgument;
};

// The op or dtype is not supported by the chosen backend.
class TOWERS_VISIBLE Unsupported : public Error
{
public:
    using Error::Error;
};

// A backend library (oneDNN, cuDNN, ...) reported a failure.
class TOWERS_VISIBLE BackendError : public Error
{
public:
    using Error::Error;
};

// A device ran out of memory. The message says on which device, how much was asked and how much
// was free; the trainer adds which tower.
class TOWERS_VISIBLE DeviceOutOfMemory : public BackendError
{
public:
    using BackendError::BackendError;
};

// A file could not be read or written, or its content is not what was expected.
class TOWERS_VISIBLE IoError : public Error
{
public:
    using Error::Error;
};

// A file could not be read for lack of memory to hold what it holds (a tensor of a checkpoint):
// an IoError, told apart where a caller says more of why.
class TOWERS_VISIBLE FileOutOfMemory : public IoError
{
public:
    using IoError::IoError;
};

// Training diverged: the loss became NaN or infinite ("model diverged with loss = NaN at step 12").
// No checkpoint of the diverged state is written; the last good one is kept.
class TOWERS_VISIBLE DivergedError : public Error
{
public:
    using Error::Error;
};

// A collective operation (gradient averaging, broadcast) was abandoned because another
// participant failed; the participant's own error is the one to report.
class TOWERS_VISIBLE CollectiveAborted : public Error
{
public:
    using Error::Error;
};

// A file's path as messages quote it: 'runs/a/config.json'. (Not "'" + path + "'": GCC 12 warns
// of a false overlap, -Wrestrict, in that operator+ where it is inlined.)
inline std::string quotedPath(const std::filesystem::path& p)
{
    std::string s = p.string();
    s.insert(s.begin(), '\'');
    s.push_back('\'');
    return s;
}

// A count with its noun as English writes it: "1 tower", "2 towers", "0 towers".
inline std::string counted(long long n, std::string_view one, std::string_view many)
{
    std::string s = std::to_string(n);
    s.push_back(' ');
    s.append(n == 1 ? one : many);
    return s;
}

} // namespace towers::engine
