#pragma once
// TFRecord files, the framing of TensorBoard's event files. Each record is, little-endian:
//   uint64 length, uint32 masked CRC-32C of those 8 bytes, the data, uint32 masked CRC-32C of it. A
//   reader stops at the first record that is not whole (a killed writer) and at
// the first CRC that does not match.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace towers::engine {

// One record's bytes: the header, `data`, the footer.
std::string tfRecordFrame(std::string_view data);

// The records of `bytes`, in order, up to the first one that is not whole; `complete` (when given)
// says whether the bytes ended at a record's end. A CRC that does not match is an IoError naming
// `what` (e.g. the file) and the offset.
std::vector<std::string> readTfRecords(std::string_view bytes, bool* complete = nullptr,
                                       const std::string& what = "TFRecord data");

// Appends records to a file. The file is opened O_APPEND | O_CLOEXEC; each record goes to the
// kernel with one write() as soon as it is given (nothing is buffered in the process), so a
// process killed at any moment leaves every record given before the one being written whole.
class TfRecordFile
{
public:
    enum class Open
    {
        CreateNew, // the file must not exist (O_CREAT | O_EXCL)
        Append,    // create it, or append to what it holds
    };
    // IoError naming the file when it cannot be opened.
    explicit TfRecordFile(std::filesystem::path path, Open how = Open::CreateNew);
    ~TfRecordFile();
    TfRecordFile(const TfRecordFile&) = delete;
    TfRecordFile& operator=(const TfRecordFile&) = delete;

    // Writes one record; IoError naming the file when the write fails (e.g. "No space left on
    // device"). After a failure the file may end in a partial record, which readers skip; the
    // records after it would not be read, so the writer refuses further writes.
    void write(std::string_view data);
    // Writes several records with one write() (a step's summaries together).
    void write(const std::vector<std::string>& records);
    // fsync: what was written is on the disk (IoError naming the file when it cannot be).
    void sync();

    const std::filesystem::path& path() const { return m_path; }

private:
    void writeBytes(const std::string& bytes);

    std::filesystem::path m_path;
    int m_fd = -1;
    bool m_failed = false;
};

} // namespace towers::engine
