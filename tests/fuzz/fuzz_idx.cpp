// libFuzzer target: the IDX parsers, plain and gzip. See README.md, "How correctness is checked".
#include "tests/fuzz/fuzz_parsers.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
    towers::fuzz::parseIdx(data, size);
    return 0;
}
