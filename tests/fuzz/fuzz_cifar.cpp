// libFuzzer target: the CIFAR-10/100 record parser. See README.md, "How correctness is checked".
#include "tests/fuzz/fuzz_parsers.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    towers::fuzz::parseCifar(data, size);
    return 0;
}
