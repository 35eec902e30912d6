#pragma once
// CRC-32C (Castagnoli, polynomial 0x1EDC6F41 reflected: 0x82F63B78), the checksum of TFRecord
// files (TensorBoard's event files) and of iSCSI, ext4 and SCTP. crc32c("123456789") = 0xE3069283.
// crc32c() uses the CPU's crc32 instruction (SSE4.2) when it has one, chosen at run time, and a
// table otherwise; both give the same values.
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace towers::engine {

// The CRC-32C of `size` bytes at `data`, continuing from `crc` (the CRC of what came before; 0
// for a new message): crc32c(b, crc32c(a)) == crc32c(a + b).
std::uint32_t crc32c(const void* data, std::size_t size, std::uint32_t crc = 0);
inline std::uint32_t crc32c(std::string_view bytes, std::uint32_t crc = 0)
{
    return crc32c(bytes.data(), bytes.size(), crc);
}

// The two implementations, for tests and benchmarks. crc32cHardware() may be called only when
// crc32cHardwareAvailable() is true.
std::uint32_t crc32cPortable(const void* data, std::size_t size, std::uint32_t crc = 0);
bool crc32cHardwareAvailable();
std::uint32_t crc32cHardware(const void* data, std::size_t size, std::uint32_t crc = 0);

// TFRecord's masked form: a CRC stored next to the data it covers is rotated and offset, so that
// the CRC of data that itself holds CRCs stays well distributed.
constexpr std::uint32_t maskCrc32c(std::uint32_t crc)
{
    return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}
constexpr std::uint32_t unmaskCrc32c(std::uint32_t masked)
{
    const std::uint32_t rotated = masked - 0xA282EAD8u;
    return (rotated >> 17) | (rotated << 15);
}

} // namespace towers::engine
