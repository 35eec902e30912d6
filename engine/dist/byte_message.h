#pragma once
// The flat byte form of what the processes of a run exchange besides tensors' bytes (the state,
// the losses and step times, evaluation counts): plain values appended as they lie in memory,
// which is the same layout on every process since they all run the same build (checked at start).
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>

#include "engine/errors.h"

namespace towers::engine {

template <class T> void putBytes(std::string& out, const T& v)
{
    static_assert(std::is_trivially_copyable_v<T>);
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// Reads back what putBytes wrote; Error "<what> is truncated (at byte i of n)" past the end.
class ByteReader
{
public:
    ByteReader(const std::string& in, std::string what) : m_in(in), m_what(std::move(what)) {}

    const char* bytes(std::size_t n)
    {
        if (n > m_in.size() - m_at)
            throw Error(m_what + " is truncated (at byte " + std::to_string(m_at) + " of " +
                        std::to_string(m_in.size()) + ")");
        const char* p = m_in.data() + m_at;
        m_at += n;
        return p;
    }
    template <class T> T take()
    {
        static_assert(std::is_trivially_copyable_v<T>);
        T v;
        std::memcpy(&v, bytes(sizeof v), sizeof v);
        return v;
    }
    bool atEnd() const { return m_at == m_in.size(); }

private:
    const std::string& m_in;
    std::string m_what;
    std::size_t m_at = 0;
};

} // namespace towers::engine
