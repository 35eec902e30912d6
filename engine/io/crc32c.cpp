#include "engine/io/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <nmmintrin.h>
#define TOWERS_CRC32C_X86 1
#else
#define TOWERS_CRC32C_X86 0
#endif

namespace towers::engine {

namespace {

constexpr std::uint32_t kPolynomial = 0x82F63B78u; // 0x1EDC6F41, bit-reversed

// Slicing-by-8 tables: kTables[0] is the byte-at-a-time table; kTables[k][b] is the CRC of byte
// b followed by k zero bytes, so eight bytes are folded in with eight look-ups.
constexpr std::array<std::array<std::uint32_t, 256>, 8> makeTables()
{
    std::array<std::array<std::uint32_t, 256>, 8> t{};
    for (std::uint32_t b = 0; b < 256; ++b) {
        std::uint32_t c = b;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ kPolynomial : c >> 1;
        t[0][b] = c;
    }
    for (std::size_t k = 1; k < 8; ++k)
        for (std::uint32_t b = 0; b < 256; ++b)
            t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
    return t;
}

constexpr auto kTables = makeTables();

#if TOWERS_CRC32C_X86
__attribute__((target("sse4.2"))) std::uint32_t
hardwareUpdate(std::uint32_t state, const unsigned char* p, std::size_t n)
{
    // Byte by byte to an 8-byte boundary, then 8 bytes per instruction, then the tail.
    while (n > 0 && (reinterpret_cast<std::uintptr_t>(p) & 7) != 0) {
        state = _mm_crc32_u8(state, *p++);
        --n;
    }
#if defined(__x86_64__)
    std::uint64_t state64 = state;
    for (; n >= 8; n -= 8, p += 8) {
        std::uint64_t word;
        std::memcpy(&word, p, 8);
        state64 = _mm_crc32_u64(state64, word);
    }
    state = std::uint32_t(state64);
#endif
    for (; n >= 4; n -= 4, p += 4) {
        std::uint32_t word;
        std::memcpy(&word, p, 4);
        state = _mm_crc32_u32(state, word);
    }
    while (n-- > 0) state = _mm_crc32_u8(state, *p++);
    return state;
}
#endif

bool detectHardware()
{
#if TOWERS_CRC32C_X86
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
#else
    return false;
#endif
}

const bool kHardware = detectHardware();

} // namespace

std::uint32_t crc32cPortable(const void* data, std::size_t size, std::uint32_t crc)
{
    const auto* p = static_cast<const unsigned char*>(data);
    std::uint32_t state = ~crc;
    for (; size >= 8; size -= 8, p += 8) {
        // Little-endian assembly of the first four bytes, whatever the host's byte order.
        const std::uint32_t low = state ^ (std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 |
                                           std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24);
        state = kTables[7][low & 0xFF] ^ kTables[6][(low >> 8) & 0xFF] ^
                kTables[5][(low >> 16) & 0xFF] ^ kTables[4][low >> 24] ^ kTables[3][p[4]] ^
                kTables[2][p[5]] ^ kTables[1][p[6]] ^ kTables[0][p[7]];
    }
    while (size-- > 0) state = (state >> 8) ^ kTables[0][(state ^ *p++) & 0xFF];
    return ~state;
}

bool crc32cHardwareAvailable()
{
    return kHardware;
}

std::uint32_t crc32cHardware(const void* data, std::size_t size, std::uint32_t crc)
{
#if TOWERS_CRC32C_X86
    return ~hardwareUpdate(~crc, static_cast<const unsigned char*>(data), size);
#else
    return crc32cPortable(data, size, crc);
#endif
}

std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc)
{
    return kHardware ? crc32cHardware(data, size, crc) : crc32cPortable(data, size, crc);
}

} // namespace towers::engine
