#pragma once
// Private to engine/train: what trainer.cpp and trainer_checkpoints.cpp share.
#include <cstdio>
#include <random>
#include <string>

namespace towers::engine {

// 128 random bits as 32 hex digits.
inline std::string newRunId()
{
    std::random_device random;
    std::string id;
    for (int i = 0; i < 4; ++i) {
        char buf[16];
        std::snprintf(buf, sizeof buf, "%08x", unsigned(random()));
        id += buf;
    }
    return id;
}

} // namespace towers::engine
