#pragma once
// The message of what `f` throws, for tests that check what a refusal says; "" when it throws
// nothing.
#include <exception>
#include <functional>
#include <string>

namespace towers::test {

inline std::string messageOf(const std::function<void()>& f)
{
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return {};
}

} // namespace towers::test
