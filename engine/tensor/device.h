#pragma once
#include <string>

namespace towers::engine {

enum class DeviceKind
{
    Host,
    Cuda
};

// Where bytes live. The host is one device; each GPU is another. A Device says what it is; it
// does not run ops (that is an execution context's job, see ops/ops.h).
struct Device
{
    DeviceKind kind = DeviceKind::Host;
    int index = 0;

    static Device host() { return {}; }
    bool isHost() const { return kind == DeviceKind::Host; }
    std::string str() const { return isHost() ? "host" : "cuda:" + std::to_string(index); }
    bool operator==(const Device&) const = default;
};

} // namespace towers::engine
