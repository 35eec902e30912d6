#pragma once
// Hostile image files for the tests of app/inference/image_files.h, `towers-cli classify` and the
// Classify page, made at run time (no binary files in the repository) and without ever holding
// their pixels in memory: BMP and PNG headers are written by hand, PNG data is deflated a row at a
// time.
#include <QString>

#include <atomic>
#include <thread>

namespace towers::test {

// An all-black 1-bit BMP: 3,300,000 x 1 is a 412 KB file.
void writeBlackBmp(const QString& path, int width, int height);
// A valid all-black 8-bit grey PNG (zlib, a row at a time): 1,000,000 x 1 is about 1 KB.
void writeBlackPng(const QString& path, int width, int height);
// A JPEG of `image`-like content with an EXIF APP1 segment holding `orientation` (1-8; 6 is
// "rotate 90 degrees clockwise to display"): the left half red, the right half blue as stored.
void writeOrientedJpeg(const QString& path, int width, int height, int orientation);
// A 64 x 64 SVG drawing, red, with a line of text: Qt's SVG reader draws the text with the font
// database, which only a GUI application has (in a plain QCoreApplication it aborts the process).
inline constexpr char kSvgWithText[] =
    "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"64\" height=\"64\">"
    "<rect width=\"64\" height=\"64\" fill=\"red\"/><text x=\"4\" y=\"30\">cat</text></svg>\n";

// mkfifo; QFAILs-worthy false when it cannot.
bool makeFifo(const QString& path);

// Watches a FIFO from another thread while the code under test runs: it tries, every few
// milliseconds, to open the FIFO for writing without blocking, which succeeds only while someone
// has it open for reading. If so, it notes it and closes it again, which also releases a reader
// blocked in open() or read() (it sees end of file), so a regression fails the test instead of
// hanging it.
class FifoWatch
{
public:
    explicit FifoWatch(const QString& path);
    ~FifoWatch();
    FifoWatch(const FifoWatch&) = delete;
    FifoWatch& operator=(const FifoWatch&) = delete;
    // True if a reader had the FIFO open at some point (stops the watch).
    bool readerSeen();

private:
    QString m_path;
    std::atomic<bool> m_stop{false};
    std::atomic<bool> m_seen{false};
    std::thread m_thread;
};

} // namespace towers::test
