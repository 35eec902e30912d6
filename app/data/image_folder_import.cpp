#include "app/data/image_folder_import.h"

#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QHash>
#include <QImageReader>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSet>
#include <QTemporaryDir>
#include <QtConcurrent/QtConcurrentMap>

#include <algorithm>
#include <cmath>
#include <deque>
#include <numeric>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "app/data/data_dirs.h"
#include "app/data/file_names.h"
#include "app/data/file_ops.h"
#include "app/inference/image_files.h"
#include "engine/data/dataset.h"
#include "engine/data/dataset_manifest.h"
#include "engine/data/file_bytes.h"
#include "engine/errors.h"
#include "engine/tensor/rng.h"

namespace towers::app {

namespace {

using engine::InvalidArgument;
using engine::IoError;

QString native(const QString& path)
{
    return QDir::toNativeSeparators(path);
}

// The suffixes Qt's image readers take ("png", "jpg", ...).
const QSet<QString>& imageSuffixes()
{
    static const QSet<QString> suffixes = [] {
        QSet<QString> s;
        for (const QByteArray& f : QImageReader::supportedImageFormats())
            s.insert(QString::fromLatin1(f).toLower());
        s.insert(QStringLiteral("jpeg"));
        s.insert(QStringLiteral("jpg"));
        return s;
    }();
    return suffixes;
}

// Whether the folder link `link` leads to `root` or a folder above it: followed, it would read the
// whole of `root` again (or more).
bool leadsAbove(const QFileInfo& link, const QString& root)
{
    const QString target = link.canonicalFilePath();
    const QString canonicalRoot = QFileInfo(root).canonicalFilePath();
    return target.isEmpty() || target == canonicalRoot || target == QLatin1String("/") ||
           canonicalRoot.startsWith(target + QLatin1Char('/'));
}

// An entry whose name is not UTF-8 (`path` relative to the imported folder, by escapedName), as
// listed as left out: Qt lists no such entry, and could open none by the name it would read.
QString notUtf8(const QString& path)
{
    return quotedPath(path) + QStringLiteral(" (a name that is not UTF-8: rename it to import it)");
}

// The sub-folders of `dir` (not hidden), sorted by name. A link to a folder counts as one (class
// folders are often links into a collection) unless it leads to `root` (the folder being imported,
// or above; those go to `ignored`, relative to `root`.
QStringList subfolders(const QString& dir, const QString& root, QStringList& ignored)
{
    QDir d(dir);
    QStringList out;
    const QFileInfoList entries =
        d.entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot, QDir::Name | QDir::IgnoreCase);
    for (const QFileInfo& e : entries) {
        if (e.isSymLink() && leadsAbove(e, root))
            ignored << quotedPath(QDir(root).relativeFilePath(e.filePath())) +
                           QStringLiteral("/ (a link to the imported folder or above it)");
        else
            out << e.fileName();
    }
    for (const QString& name : namesNotUtf8(dir))
        ignored << notUtf8(QDir(root).relativeFilePath(dir + QLatin1Char('/') + name));
    return out;
}

// Reads the image files of the class folders (and of their sub-folders, and where links lead),
// each folder and each image file once across all classes and both splits: the same picture never
// lands in two classes, nor in the training and the test set. What is really in a class folder is
// read first, links after, so that a link in one class to another class's folder (or image) leaves
// that folder to its own class; the link is listed as passed over, naming the class that read it.
class ImageCollector
{
public:
    ImageCollector(const QString& root, QStringList& ignored) : m_root(root), m_ignored(ignored) {}

    // Reads folder `dir` (a class folder, or where a link in one leads) for `owner` ("class b")
    // into `files` (which must stay in place until followLinks() returned); links in it are
    // followed by followLinks(). Listed as passed over when the folder was claimed already (a
    // link to another class's folder, or to one read before).
    void readFolder(const QString& dir, const QString& owner, QStringList& files)
    {
        const QString canonical = QFileInfo(dir).canonicalFilePath();
        if (const auto it = m_folders.constFind(canonical); it != m_folders.cend()) {
            m_ignored << relative(dir) +
                             QStringLiteral("/ (a link to a folder read already: %1)").arg(*it);
            return;
        }
        m_folders.insert(canonical, owner);
        walk(dir, owner, files);
    }

    // Follows the links found so far, and those found through them, in the order found.
    void followLinks()
    {
        while (!m_links.empty()) {
            const Link link = m_links.front();
            m_links.pop_front();
            const QFileInfo& e = link.entry;
            if (e.isDir()) {
                if (leadsAbove(e, m_root))
                    m_ignored << relative(e.filePath()) +
                                     QStringLiteral(
                                         "/ (a link to the imported folder or above it)");
                else
                    readFolder(e.filePath(), link.owner, *link.files);
            } else if (imageSuffixes().contains(e.suffix().toLower())) {
                const QString key = fileKey(e.filePath());
                if (key.isEmpty()) { // a broken link: reported as unreadable
                    *link.files << e.filePath();
                } else if (const auto it = m_images.constFind(key); it != m_images.cend()) {
                    m_ignored
                        << relative(e.filePath()) +
                               QStringLiteral(" (a link to an image read already: %1)").arg(*it);
                } else {
                    m_images.insert(key, link.owner);
                    *link.files << e.filePath();
                }
            } else {
                m_ignored << relative(e.filePath());
            }
        }
    }

private:
    struct Link
    {
        QFileInfo entry;
        QString owner;
        QStringList* files;
    };

    // Which file `path` is, whatever its name (links followed): its canonical path, or, for a
    // file with more than one name (hard links), its device and inode; empty where it cannot be
    // reached (a broken link).
    static QString fileKey(const QString& path)
    {
        struct stat st = {};
        if (::stat(QFile::encodeName(path).constData(), &st) != 0) return {};
        if (st.st_nlink > 1 && S_ISREG(st.st_mode))
            return QStringLiteral("inode %1:%2")
                .arg(qulonglong(st.st_dev))
                .arg(qulonglong(st.st_ino));
        return QFileInfo(path).canonicalFilePath();
    }

    // Only for what is listed as left out: not for each of thousands of images.
    QString relative(const QString& path) const
    {
        return quotedPath(QDir(m_root).relativeFilePath(path));
    }

    // What is really in `dir` (its folders, recursively, and files); its links are queued.
    void walk(const QString& dir, const QString& owner, QStringList& files)
    {
        for (const QString& name : namesNotUtf8(dir))
            m_ignored << notUtf8(QDir(m_root).relativeFilePath(dir + QLatin1Char('/') + name));
        // System too: FIFOs, devices and broken links, which are then named (as unreadable
        // images, or as passed over), never left out unsaid.
        const QFileInfoList entries =
            QDir(dir).entryInfoList(QDir::AllEntries | QDir::System | QDir::NoDotAndDotDot);
        for (const QFileInfo& e : entries) {
            if (e.fileName().startsWith(QLatin1Char('.'))) continue; // .DS_Store and the like
            if (e.isSymLink()) {
                m_links.push_back({e, owner, &files});
            } else if (e.isDir()) {
                const QString canonical = e.canonicalFilePath();
                if (const auto it = m_folders.constFind(canonical); it != m_folders.cend()) {
                    // Inside a folder reached before by a link to it (another class's claim).
                    m_ignored << relative(e.filePath()) +
                                     QStringLiteral("/ (a folder read already: %1)").arg(*it);
                    continue;
                }
                m_folders.insert(canonical, owner);
                walk(e.filePath(), owner, files);
            } else if (imageSuffixes().contains(e.suffix().toLower())) {
                // Another name of a file read already (a hard link) is that image again.
                const QString key = fileKey(e.filePath());
                if (const auto it = m_images.constFind(key);
                    !key.isEmpty() && it != m_images.cend()) {
                    m_ignored << relative(e.filePath()) +
                                     QStringLiteral(" (another name of an image read already: %1)")
                                         .arg(*it);
                    continue;
                }
                m_images.insert(key.isEmpty() ? e.filePath() : key, owner);
                files << e.filePath();
            } else {
                m_ignored << relative(e.filePath());
            }
        }
    }

    QString m_root;
    QStringList& m_ignored;
    QHash<QString, QString> m_folders; // canonical path: whose ("class b")
    QHash<QString, QString> m_images;  // an image file read (fileKey): whose
    std::deque<Link> m_links;
};

struct Item
{
    QString path;
    int label = 0;
    bool test = false;
};

struct Decoded
{
    std::vector<std::uint8_t> pixels;     // HWC
    std::vector<std::uint8_t> grayPixels; // at the second shape, when one was asked for
    bool gray = true;
    QString error;
};

// No images yet, of `shape` ([H, W, C]).
engine::ImageSet emptySet(const engine::Shape& shape)
{
    engine::ImageSet set;
    set.height = shape[0];
    set.width = shape[1];
    set.channels = shape[2];
    return set;
}

// One image as `shape` ([H, W, C]) and, when `grayShape` is given (its decoding size must be
// `shape`'s: decodedShortSide), also as that from the same decoded image: what decoding the file
// again for it would give, bit for bit.
Decoded decode(const Item& item, const engine::Shape& shape, const engine::Shape* grayShape,
               engine::ImageFit fit)
{
    Decoded d;
    try {
        const QImage image = readImageFile(item.path, shape);
        const auto bring = [&image, fit](const engine::Shape& to) {
            engine::ImageSet one = emptySet(to);
            appendImage(image, to, one, fit);
            return std::move(one.pixels);
        };
        d.pixels = bring(shape);
        if (shape[2] == 3)
            for (std::size_t i = 0; i + 2 < d.pixels.size() && d.gray; i += 3)
                d.gray = d.pixels[i] == d.pixels[i + 1] && d.pixels[i] == d.pixels[i + 2];
        if (grayShape && d.gray) d.grayPixels = bring(*grayShape);
    } catch (const std::exception& e) {
        // The reason alone: the path is kept apart (it may hold any character, a newline too).
        d.error = QString::fromUtf8(e.what());
        for (const QString& path : {item.path, native(item.path)})
            if (d.error.startsWith(path + QStringLiteral(": "))) {
                d.error.remove(0, path.size() + 2);
                break;
            }
        if (d.error.isEmpty()) d.error = QStringLiteral("cannot read the image");
    }
    return d;
}

void putBe32(QByteArray& out, std::uint32_t v)
{
    out.append(char(v >> 24)).append(char(v >> 16)).append(char(v >> 8)).append(char(v));
}

void writeBytes(const QString& path, const QByteArray& header, const std::uint8_t* data,
                qint64 size)
{
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
        throw IoError(native(path).toStdString() +
                      ": cannot write: " + f.errorString().toStdString());
    writeAll(f, header.constData(), header.size());
    writeAll(f, reinterpret_cast<const char*>(data), size);
    syncFile(f);
}

// One split as IDX files: images (3 dimensions for 1 channel, 4 for colour) and labels (bytes, or
// big-endian 32-bit integers for more than 256 classes).
void writeIdx(const QString& dir, const QString& prefix, const engine::ImageSet& set, int classes)
{
    QByteArray head;
    putBe32(head, set.channels == 1 ? 0x00000803u : 0x00000804u);
    putBe32(head, std::uint32_t(set.count));
    putBe32(head, std::uint32_t(set.height));
    putBe32(head, std::uint32_t(set.width));
    if (set.channels != 1) putBe32(head, std::uint32_t(set.channels));
    writeBytes(dir + QLatin1Char('/') + prefix + QStringLiteral("-images-idx3-ubyte"), head,
               set.pixels.data(), qint64(set.pixels.size()));
    const bool wide = classes > 256;
    std::vector<std::uint8_t> labels;
    labels.reserve(set.labels.size() * (wide ? 4 : 1));
    for (const std::int32_t l : set.labels) {
        if (wide)
            for (const int shift : {24, 16, 8})
                labels.push_back(std::uint8_t(std::uint32_t(l) >> shift));
        labels.push_back(std::uint8_t(l));
    }
    QByteArray lhead;
    putBe32(lhead, wide ? 0x00000C01u : 0x00000801u);
    putBe32(lhead, std::uint32_t(set.count));
    writeBytes(dir + QLatin1Char('/') + prefix + QStringLiteral("-labels-idx1-ubyte"), lhead,
               labels.data(), qint64(labels.size()));
}

// An import's temporary folder, held (flock on the folder) for as long as it lives: a later
// import of the same name on this machine leaves it alone.
class HeldFolder
{
public:
    explicit HeldFolder(const QString& path)
        : m_fd(::open(QFile::encodeName(path).constData(), O_RDONLY | O_DIRECTORY | O_CLOEXEC))
    {
        if (m_fd >= 0 && ::flock(m_fd, LOCK_EX | LOCK_NB) != 0) {
            ::close(m_fd);
            m_fd = -1;
        }
    }
    HeldFolder(const HeldFolder&) = delete;
    HeldFolder& operator=(const HeldFolder&) = delete;
    ~HeldFolder()
    {
        if (m_fd >= 0) ::close(m_fd);
    }
    // Whether this process holds it (nobody else did).
    bool held() const { return m_fd >= 0; }

private:
    int m_fd = -1;
};

// The temporary folders of imports of `name` into `dataDir` that were killed before their rename
// (.NAME.import-XXXXXX), removed; their size would stay in the data folder. Only those unchanged
// for an hour (an import writes its folder within moments of making it: a shared data folder's
// import on another machine, whose lock this one cannot see, or one of an older Towers that
// takes none, is younger) and held by no import here.
void removeKilledImports(const QString& dataDir, const QString& name)
{
    const QString prefix = QLatin1Char('.') + name + QStringLiteral(".import-");
    const QFileInfoList found = QDir(dataDir).entryInfoList(
        {prefix + QLatin1Char('*')}, QDir::Dirs | QDir::Hidden | QDir::NoDotAndDotDot);
    const QDateTime hourAgo = QDateTime::currentDateTimeUtc().addSecs(-3600);
    for (const QFileInfo& f : found) {
        if (!f.fileName().startsWith(prefix) || f.isSymLink()) continue;
        if (f.lastModified().toUTC() > hourAgo) continue;
        const HeldFolder hold(f.absoluteFilePath());
        if (hold.held()) QDir(f.absoluteFilePath()).removeRecursively();
    }
}

// What an imported dataset's folder holds that no import wrote there (a user's notes, a folder of
// their own), by name (a folder's with '/' after it), sorted.
QStringList notWrittenByAnImport(const QString& folder)
{
    const QStringList written = {
        QStringLiteral("train-images-idx3-ubyte"),     QStringLiteral("train-labels-idx1-ubyte"),
        QStringLiteral("t10k-images-idx3-ubyte"),      QStringLiteral("t10k-labels-idx1-ubyte"),
        QString::fromLatin1(engine::kDatasetManifest), QString::fromLatin1(kImportedFilesName)};
    QStringList out;
    const QFileInfoList entries = QDir(folder).entryInfoList(
        QDir::AllEntries | QDir::Hidden | QDir::System | QDir::NoDotAndDotDot, QDir::Name);
    for (const QFileInfo& e : entries)
        if (!written.contains(e.fileName()) || !(e.isFile() && !e.isSymLink()))
            out << e.fileName() + (e.isDir() && !e.isSymLink() ? QStringLiteral("/") : QString());
    return out;
}

// Replacing an imported dataset removes its folder: refused (InvalidArgument naming them) where it
// holds anything an import does not write. A link is replaced as a link, what it points at kept.
void refuseTheUsersFiles(const QString& target, const std::string& targetText)
{
    if (QFileInfo(target).isSymLink()) return;
    const QStringList others = notWrittenByAnImport(target);
    if (others.isEmpty()) return;
    QStringList shown = others.mid(0, 5);
    if (others.size() > 5) shown << QStringLiteral("and %1 more").arg(others.size() - 5);
    throw InvalidArgument(targetText + " holds what an import does not write (" +
                          shown.join(QStringLiteral(", ")).toStdString() +
                          "), which replacing it would delete: move that out of it first, or "
                          "choose another name (nothing was changed)");
}

// Keeps the first channel of every pixel (the images were gray in RGB).
void toOneChannel(engine::ImageSet& set)
{
    std::vector<std::uint8_t> one(set.pixels.size() / 3);
    for (std::size_t i = 0; i < one.size(); ++i) one[i] = set.pixels[3 * i];
    set.pixels = std::move(one);
    set.channels = 1;
}

} // namespace

std::vector<qint64> ImageFolderScan::trainCounts() const
{
    std::vector<qint64> n;
    for (const QStringList& f : trainFiles) n.push_back(qint64(f.size()));
    return n;
}

qint64 ImportResult::trainImages() const
{
    return std::accumulate(train.begin(), train.end(), qint64(0));
}

qint64 ImportResult::testImages() const
{
    return std::accumulate(test.begin(), test.end(), qint64(0));
}

qint64 ImageFolderScan::images() const
{
    qint64 n = 0;
    for (const auto* split : {&trainFiles, &testFiles})
        for (const QStringList& f : *split) n += qint64(f.size());
    return n;
}

std::optional<ImportedFiles> readImportedFiles(const QString& folder)
{
    QFile f(folder + QLatin1Char('/') + QString::fromLatin1(kImportedFilesName));
    // A list larger than 1 GiB is no list an import wrote (that would be millions of images of
    // paths hundreds of characters long).
    if (!QFileInfo(f).isFile() || f.size() > (qint64(1) << 30) || !f.open(QIODevice::ReadOnly))
        return std::nullopt;
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll());
    if (!doc.isObject()) return std::nullopt;
    ImportedFiles files;
    for (auto [key, list] : {std::pair{"train", &files.train}, std::pair{"test", &files.test}}) {
        const QJsonValue v = doc.object().value(QLatin1String(key));
        if (!v.isArray()) return std::nullopt;
        for (const QJsonValue& p : v.toArray()) {
            if (!p.isString()) return std::nullopt;
            *list << p.toString();
        }
    }
    return files;
}

QStringList importedImageFiles(const engine::Dataset& data, bool train, bool test,
                               const std::vector<std::int64_t>* validationIndex)
{
    const auto files = readImportedFiles(QString::fromStdString(data.location.string()));
    if (!files || files->train.size() != data.train.count || files->test.size() != data.test.count)
        return {};
    QStringList out;
    if (validationIndex)
        for (const std::int64_t i : *validationIndex) out << files->train[qsizetype(i)];
    else if (train)
        out = files->train;
    if (!validationIndex && test) out += files->test;
    return out;
}

QString quotedPath(const QString& path)
{
    const auto odd = [](QChar c) { return !c.isPrint() && !c.isSurrogate(); };
    if (std::none_of(path.begin(), path.end(), odd)) return path;
    QString out(QLatin1Char('"'));
    for (const QChar c : path) {
        switch (c.unicode()) {
        case '\n':
            out += QStringLiteral("\\n");
            break;
        case '\r':
            out += QStringLiteral("\\r");
            break;
        case '\t':
            out += QStringLiteral("\\t");
            break;
        case '"':
            out += QStringLiteral("\\\"");
            break;
        case '\\':
            out += QStringLiteral("\\\\");
            break;
        default:
            if (odd(c))
                out += QStringLiteral("\\u%1").arg(c.unicode(), 4, 16, QLatin1Char('0'));
            else
                out += c;
        }
    }
    return out + QLatin1Char('"');
}

QString datasetNameFromFolder(const QString& folder, QString* note)
{
    // Dataset names are ASCII (engine isImportedDatasetName: a folder and a command-line word
    // alike on every system, and a part of run folder names), so other letters are written in
    // ASCII where Unicode gives them a form: accents dropped (compatibility decomposition, the
    // marks left out: "ÜBER" is "uber", "ﬁ" is "fi"), a few letters spelt out ("ß" is "ss").
    const QString base = QFileInfo(QDir::cleanPath(folder)).fileName();
    const QString decomposed = base.toLower().normalized(QString::NormalizationForm_KD);
    static const QHash<QChar, QString> spelt = {
        {QChar(0x00DF), QStringLiteral("ss")}, {QChar(0x00E6), QStringLiteral("ae")},
        {QChar(0x00F8), QStringLiteral("o")},  {QChar(0x0153), QStringLiteral("oe")},
        {QChar(0x0111), QStringLiteral("d")},  {QChar(0x0142), QStringLiteral("l")},
        {QChar(0x00FE), QStringLiteral("th")}, {QChar(0x00F0), QStringLiteral("d")},
        {QChar(0x0131), QStringLiteral("i")}};
    const auto ascii = [](QChar c) {
        return (c >= QLatin1Char('a') && c <= QLatin1Char('z')) ||
               (c >= QLatin1Char('0') && c <= QLatin1Char('9')) || c == QLatin1Char('_') ||
               c == QLatin1Char('.');
    };
    QString name;
    bool lost = false; // letters or digits with no ASCII form
    for (qsizetype i = 0; i < decomposed.size(); ++i) {
        const QChar c = decomposed[i];
        if (c.isMark()) continue; // an accent of the letter before
        QString as = ascii(c) ? QString(c) : spelt.value(c);
        if (as.isEmpty() && c.isHighSurrogate() && i + 1 < decomposed.size()) {
            lost = lost || QChar::isLetterOrNumber(QChar::surrogateToUcs4(c, decomposed[i + 1]));
            ++i;
        } else if (as.isEmpty()) {
            lost = lost || c.isLetterOrNumber();
        }
        if (!as.isEmpty())
            name += as;
        else if (!name.endsWith(QLatin1Char('-')))
            name += QLatin1Char('-');
    }
    while (!name.isEmpty() && !name.front().isLetterOrNumber()) name.remove(0, 1);
    while (name.endsWith(QLatin1Char('-'))) name.chop(1);
    name.truncate(64);
    if (name.isEmpty()) name = QStringLiteral("images");
    if (engine::findDatasetSpec(name.toStdString())) name += QStringLiteral("-images");
    if (note)
        *note = lost ? QStringLiteral("the dataset is named %1: a dataset name is made of "
                                      "lowercase ASCII letters, digits, '-', '_' and '.', and the "
                                      "letters of the folder name '%2' that have no such form "
                                      "were left out")
                           .arg(name, base)
                     : QString();
    return name;
}

ImageFolderScan scanImageFolder(const QString& source)
{
    ImageFolderScan s;
    s.source = QDir::cleanPath(QFileInfo(source).absoluteFilePath());
    const std::string where = native(s.source).toStdString();
    const QFileInfo info(s.source);
    if (!info.exists()) throw IoError(where + ": no such folder");
    if (!info.isDir()) throw IoError(where + " is not a folder");
    if (!info.isReadable()) throw IoError(where + ": cannot read the folder (permission denied)");

    QStringList listedBelow; // what the class folders' listing below reports
    const QStringList top = subfolders(s.source, s.source, listedBelow);
    const QString trainDir = s.source + QStringLiteral("/train");
    for (const char* t : {"test", "val", "validation"})
        if (top.contains(QString::fromLatin1(t)) && top.contains(QStringLiteral("train"))) {
            s.splitFolders = true;
            s.testFolder = QString::fromLatin1(t);
            break;
        }
    const QString classRoot = s.splitFolders ? trainDir : s.source;
    if (s.splitFolders) // beside train/ and test/: the listing below reads neither
        for (const QString& name : namesNotUtf8(s.source)) s.ignored << notUtf8(name);
    const QStringList names = subfolders(classRoot, s.source, s.ignored);
    for (const QString& c : names)
        if (c.contains(QLatin1Char('\n'))) {
            QString shown = c;
            shown.replace(QLatin1Char('\n'), QStringLiteral("\\n"));
            throw InvalidArgument(where + ": the class folder '" + shown.toStdString() +
                                  "' has a line break in its name (shown as \\n): rename it");
        }
    const QString testRoot = s.source + QLatin1Char('/') + s.testFolder;
    const QStringList testNames =
        s.splitFolders ? subfolders(testRoot, s.source, s.ignored) : QStringList();
    // Every class folder of both splits, then the links in them: each folder and image once.
    ImageCollector collector(s.source, s.ignored);
    std::deque<QStringList> train(std::size_t(names.size())), test(std::size_t(testNames.size()));
    const auto owner = [&](const QString& c, const QString& split) {
        return s.splitFolders ? QStringLiteral("class %1 of %2/").arg(c, split)
                              : QStringLiteral("class %1").arg(c);
    };
    // The class folders that are folders first, then those that are links: a link "a -> b" is
    // passed over as b's, whichever name sorts first, and b keeps its images.
    const auto readClasses = [&](const QString& root, const QStringList& classes,
                                 const QString& split, std::deque<QStringList>& files, bool links) {
        for (qsizetype i = 0; i < classes.size(); ++i)
            if (const QString dir = root + QLatin1Char('/') + classes[i];
                QFileInfo(dir).isSymLink() == links)
                collector.readFolder(dir, owner(classes[i], split), files[std::size_t(i)]);
    };
    for (const bool links : {false, true}) {
        readClasses(classRoot, names, QStringLiteral("train"), train, links);
        readClasses(testRoot, testNames, s.testFolder, test, links);
    }
    collector.followLinks();
    // A folder without a single image file is no class (an empty "unsorted/", say): left out.
    for (qsizetype i = 0; i < names.size(); ++i) {
        QStringList& files = train[std::size_t(i)];
        if (files.isEmpty()) {
            s.ignored << QDir(s.source).relativeFilePath(classRoot + QLatin1Char('/') + names[i]) +
                             QStringLiteral("/ (no image: no class)");
            continue;
        }
        files.sort();
        s.classes << names[i];
        s.trainFiles.push_back(std::move(files));
    }
    // Files beside the class folders belong to no class.
    for (const QFileInfo& f : QDir(classRoot).entryInfoList(QDir::Files | QDir::NoDotAndDotDot))
        if (!f.fileName().startsWith(QLatin1Char('.')))
            s.ignored << quotedPath(QDir(s.source).relativeFilePath(f.filePath())) +
                             QStringLiteral(" (in no class folder)");
    s.testFiles.assign(std::size_t(s.classes.size()), {});
    for (qsizetype j = 0; j < testNames.size(); ++j) {
        const auto i = s.classes.indexOf(testNames[j]);
        if (i < 0)
            throw InvalidArgument(native(testRoot).toStdString() + ": class folder '" +
                                  testNames[j].toStdString() + "' is not in " +
                                  native(trainDir).toStdString());
        QStringList& files = test[std::size_t(j)];
        files.sort();
        s.testFiles[std::size_t(i)] = std::move(files);
    }
    // Class folders whose names differ only in case ("Cat" and "cat") would be two classes that
    // one case-insensitive filesystem cannot hold apart, and that eval --dataset matches by name
    // as one: refused, naming both (which of them to merge or rename is the user's choice).
    {
        QHash<QString, QString> byFolded;
        for (const QString& c : std::as_const(s.classes)) {
            const QString folded = c.toCaseFolded();
            if (const auto it = byFolded.constFind(folded); it != byFolded.cend())
                throw InvalidArgument(
                    native(classRoot).toStdString() + ": the class folders '" + it->toStdString() +
                    "' and '" + c.toStdString() +
                    "' differ only in case: one class or two? Merge their images into one "
                    "folder, or rename one (class names must differ in more than case)");
            byFolded.insert(folded, c);
        }
    }
    const int withImages = int(s.classes.size());
    if (withImages < 2)
        throw InvalidArgument(
            where + ": " + std::to_string(withImages) + " class folder" +
            (withImages == 1 ? "" : "s") +
            " with images; a dataset needs two or more (one sub-folder per class, named after "
            "it, with its images" +
            (s.splitFolders ? " in train/ and " + s.testFolder.toStdString() + "/" : "") + ")");
    if (s.classes.size() > engine::kMaxImportedClasses)
        throw InvalidArgument(where + ": " + std::to_string(s.classes.size()) +
                              " class folders; a dataset has at most " +
                              std::to_string(engine::kMaxImportedClasses));
    return s;
}

namespace {

// Where an import goes, from its options, checked before anything is read or written: the
// dataset's name (and what was made of the folder's name), the data folder and the place in it,
// and whether something was there already (a dataset of an earlier import, to be replaced).
struct ImportPlace
{
    QString name, nameNote, dataDir, target;
    std::string targetText;
    bool existed = false;
};

ImportPlace importPlace(const ImportOptions& o)
{
    // The options first, before anything is read or written.
    QString nameNote;
    const QString name = o.name.isEmpty() ? datasetNameFromFolder(o.source, &nameNote) : o.name;
    std::string why;
    if (!engine::isImportedDatasetName(name.toStdString(), &why)) throw InvalidArgument(why);
    if (o.size != 0 && (o.size < kMinImportSide || o.size > kMaxImportSide))
        throw InvalidArgument("the image size must be from " + std::to_string(kMinImportSide) +
                              " to " + std::to_string(kMaxImportSide) + " pixels, got " +
                              std::to_string(o.size));
    if (o.channels != 0 && o.channels != 1 && o.channels != 3)
        throw InvalidArgument("channels must be 1 (grayscale) or 3 (colour), got " +
                              std::to_string(o.channels));
    if (!(o.testFraction >= 0 && o.testFraction < 1))
        throw InvalidArgument("the test fraction must be from 0 to below 1, got " +
                              std::to_string(o.testFraction));
    const QString dataDir = QDir::cleanPath(
        QFileInfo(o.dataDir.isEmpty() ? defaultDataDir() : o.dataDir).absoluteFilePath());
    if (dataDir.isEmpty()) throw IoError("no data folder: name one (no home folder is known)");
    const QString target = dataDir + QLatin1Char('/') + name;
    const std::string targetText = native(target).toStdString();
    const QFileInfo existing(target);
    if (existing.exists() || existing.isSymLink()) {
        bool imported = false;
        try {
            imported = existing.isDir() && engine::readDatasetManifest(target.toStdString());
        } catch (const engine::Error&) {
            imported = true; // a damaged imported dataset may be replaced
        }
        if (!imported)
            throw InvalidArgument(targetText +
                                  " exists and is no dataset made by an import: choose another "
                                  "name (nothing was changed)");
        if (!o.overwrite)
            throw InvalidArgument(
                "a dataset " + name.toStdString() + " exists in " + native(dataDir).toStdString() +
                ": choose another name, or replace it (" + o.overwriteHint.toStdString() + ")");
        refuseTheUsersFiles(target, targetText);
    }
    return {name, nameNote, dataDir, target, targetText, existing.exists() || existing.isSymLink()};
}

// Which image goes where: without test folders, each class's share held out at random
// (seeded), at least one of a class of two or more when the fraction is not 0.
std::vector<Item> importItems(const ImageFolderScan& scan, const ImportOptions& o)
{
    std::vector<Item> items;
    engine::Rng rng(o.seed);
    for (int c = 0; c < scan.classes.size(); ++c) {
        const QStringList& files = scan.trainFiles[std::size_t(c)];
        std::vector<bool> test(std::size_t(files.size()), false);
        if (!scan.splitFolders && o.testFraction > 0 && files.size() >= 2) {
            const auto n = files.size();
            const auto k = std::clamp<qsizetype>(
                qsizetype(std::llround(double(n) * o.testFraction)), 1, n - 1);
            const std::vector<std::int64_t> order = rng.permutation(n);
            for (qsizetype i = 0; i < k; ++i) test[std::size_t(order[std::size_t(i)])] = true;
        }
        for (qsizetype i = 0; i < files.size(); ++i)
            items.push_back({files[i], c, test[std::size_t(i)]});
        for (const QString& f : scan.testFiles[std::size_t(c)]) items.push_back({f, c, true});
    }
    return items;
}

// The images of an import as its two sets, each record's file in order (kImportedFilesName), and
// whether they are grayscale; `result` gets the counts and the files that could not be read.
struct ImportedSets
{
    engine::ImageSet sets[2];
    QJsonArray setFiles[2];
    bool gray = false;
};

ImportedSets decodeImages(const std::vector<Item>& items, const ImageFolderScan& scan,
                          const ImportOptions& o,
                          const std::function<void(qint64, qint64)>& progress,
                          const std::atomic<bool>* cancel, ImportResult& result)
{
    // Decoded in parallel, in order. Without a size and channels: colour at 32x32, and, while
    // every image is gray, grayscale at 28x28 from the same decoding, which is kept when all were
    // gray: never scaled twice. The two sizes decode alike (decodedShortSide: the constant), so
    // these are the bytes a second decoding at 28x28 would give.
    static_assert(kDecodedShortSide >= 4 * 32);
    const bool auto2 = o.size == 0 && o.channels == 0;
    const int firstSide = o.size != 0 ? o.size : o.channels == 1 ? 28 : 32;
    const engine::Shape shape{firstSide, firstSide, o.channels == 1 ? 1 : 3};
    const engine::Shape grayShape{28, 28, 1}; // the 28x28 networks' size for grayscale
    ImportedSets out{{emptySet(shape), emptySet(shape)}, {}, false};
    auto& sets = out.sets;
    auto& setFiles = out.setFiles;
    engine::ImageSet graySets[2] = {emptySet(grayShape), emptySet(grayShape)};
    bool allGray = true;
    const qint64 n = qint64(items.size());
    constexpr qint64 kChunk = 256;
    if (progress) progress(0, n);
    for (qint64 begin = 0; begin < n; begin += kChunk) {
        if (cancel && cancel->load()) throw engine::Error("import cancelled: nothing was written");
        const std::vector<Item> chunk(items.begin() + begin,
                                      items.begin() + std::min(n, begin + kChunk));
        const engine::Shape* second = auto2 && allGray ? &grayShape : nullptr;
        const QList<Decoded> decoded = QtConcurrent::blockingMapped<QList<Decoded>>(
            chunk, [&shape, second, fit = o.fit](const Item& item) {
                return decode(item, shape, second, fit);
            });
        for (qsizetype i = 0; i < decoded.size(); ++i) {
            const Item& item = chunk[std::size_t(i)];
            const Decoded& d = decoded[i];
            if (!d.error.isEmpty()) {
                result.unreadable.push_back({item.path, d.error});
                result.skipped << quotedPath(native(item.path)) + QStringLiteral(": ") + d.error;
                continue;
            }
            allGray = allGray && d.gray;
            engine::ImageSet& set = sets[item.test ? 1 : 0];
            set.pixels.insert(set.pixels.end(), d.pixels.begin(), d.pixels.end());
            set.labels.push_back(item.label);
            ++set.count;
            setFiles[item.test ? 1 : 0].append(item.path);
            if (auto2 && allGray) {
                engine::ImageSet& g = graySets[item.test ? 1 : 0];
                g.pixels.insert(g.pixels.end(), d.grayPixels.begin(), d.grayPixels.end());
                g.labels.push_back(item.label);
                ++g.count;
            }
            ++(item.test ? result.test : result.train)[std::size_t(item.label)];
        }
        if (!allGray)
            for (auto& g : graySets) g.pixels = {}; // colour after all: gives the memory back
        if (progress) progress(std::min(n, begin + kChunk), n);
    }
    for (int c = 0; c < scan.classes.size(); ++c)
        if (result.train[std::size_t(c)] == 0)
            throw InvalidArgument(
                native(scan.source).toStdString() + ": class '" + scan.classes[c].toStdString() +
                "' has no training image that could be read" +
                (result.skipped.isEmpty()
                     ? std::string()
                     : " (first refused: " + result.skipped.front().toStdString() + ")"));
    if (sets[1].count == 0)
        throw InvalidArgument(
            native(scan.source).toStdString() + ": no image is left for the test set (" +
            (scan.splitFolders ? std::string("its test folder holds no image that could be read")
             : o.testFraction == 0
                 ? std::string("a test fraction of 0 holds none out: give one above 0, or a "
                               "test/ folder")
                 : std::string("a class needs two images or more for one to be held out, and "
                               "none has: add images, or give a test/ folder")) +
            ")");
    const bool gray = o.channels == 1 || (o.channels == 0 && allGray);
    if (gray && auto2) {
        for (int i = 0; i < 2; ++i) sets[i] = std::move(graySets[i]);
    } else if (gray && sets[0].channels == 3)
        for (auto& s : sets) toOneChannel(s);
    for (const auto& s : sets)
        if (std::uint64_t(s.pixels.size()) + 20 > engine::kMaxDatasetFileBytes)
            throw InvalidArgument("the images would need " + std::to_string(s.pixels.size()) +
                                  " bytes, more than the 4 GiB an IDX file may hold: import "
                                  "fewer or smaller images");
    out.gray = gray;
    return out;
}

// The dataset written beside its place, then renamed into it (replacing an earlier import's in
// one step where the file system can); its folder goes into `result`.
void writeImport(const ImportPlace& at, const ImportedSets& d, const engine::ManifestExtras& extras,
                 int classCount, const ImportOptions& o, const std::atomic<bool>* cancel,
                 ImportResult& result)
{
    const QString& name = at.name;
    const QString& dataDir = at.dataDir;
    const QString& target = at.target;
    const std::string& targetText = at.targetText;
    const auto& sets = d.sets;
    const auto& setFiles = d.setFiles;

    makeFolder(dataDir);
    removeKilledImports(dataDir, name);
    QTemporaryDir temp(dataDir + QStringLiteral("/.") + name + QStringLiteral(".import-XXXXXX"));
    if (!temp.isValid())
        throw IoError(native(dataDir).toStdString() +
                      ": cannot make a folder there: " + temp.errorString().toStdString());
    const HeldFolder writing(temp.path()); // not a killed import's, to another import
    if (cancel && cancel->load()) throw engine::Error("import cancelled: nothing was written");
    writeIdx(temp.path(), QStringLiteral("train"), sets[0], classCount);
    writeIdx(temp.path(), QStringLiteral("t10k"), sets[1], classCount);
    const std::string manifest = engine::datasetManifestJson(result.spec, extras);
    writeBytes(temp.path() + QLatin1Char('/') + QString::fromLatin1(engine::kDatasetManifest), {},
               reinterpret_cast<const std::uint8_t*>(manifest.data()), qint64(manifest.size()));
    const QByteArray files = QJsonDocument(QJsonObject{{QStringLiteral("train"), setFiles[0]},
                                                       {QStringLiteral("test"), setFiles[1]}})
                                 .toJson(QJsonDocument::Compact);
    writeBytes(temp.path() + QLatin1Char('/') + QString::fromLatin1(kImportedFilesName), {},
               reinterpret_cast<const std::uint8_t*>(files.constData()), qint64(files.size()));
    syncFolder(temp.path());
    // The name as it is now (reading and decoding took their time): one that appeared meanwhile
    // is another import's, kept; one that is still there is checked for the user's files again.
    const std::string madeMeanwhile =
        targetText + " was made while this import ran (another import of " + name.toStdString() +
        "?): it is kept, and this import is not (to replace it: " + o.overwriteHint.toStdString() +
        ")";
    const QFileInfo now(target);
    if (now.exists() || now.isSymLink()) {
        if (!at.existed) throw IoError(madeMeanwhile);
        refuseTheUsersFiles(target, targetText);
        QTemporaryDir old(dataDir + QStringLiteral("/.") + name + QStringLiteral(".old-XXXXXX"));
        if (!old.isValid())
            throw IoError(native(dataDir).toStdString() +
                          ": cannot make a folder there: " + old.errorString().toStdString());
        // The replaced one (perhaps a link, never followed) goes with `old`. Where it could not
        // be moved there after the swap, or a kill comes first, it stays as a killed import's
        // folder, which a later import removes: the import is done all the same.
        (void)replacePath(temp.path(), target, old.path() + QStringLiteral("/replaced"));
        temp.setAutoRemove(false);
    } else {
        try {
            renamePath(temp.path(), target);
        } catch (const IoError&) {
            // Another import of the name (or something else) made the folder in between: it is
            // kept, and this one goes.
            const QFileInfo after(target);
            if (!after.exists() && !after.isSymLink()) throw;
            throw IoError(madeMeanwhile);
        }
        temp.setAutoRemove(false);
    }
    // QTemporaryDir made it for its owner only; a dataset folder is as any other (mkdir's 0755).
    QFile::setPermissions(target, QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner |
                                      QFile::ReadGroup | QFile::ExeGroup | QFile::ReadOther |
                                      QFile::ExeOther);
    syncFolder(dataDir);
    result.folder = target;
}

} // namespace

ImportResult importImageFolder(const ImportOptions& o,
                               const std::function<void(qint64, qint64)>& progress,
                               const std::atomic<bool>* cancel)
{
    const ImportPlace at = importPlace(o);
    const QString& name = at.name;
    const QString& target = at.target;
    const std::string& targetText = at.targetText;
    const ImageFolderScan scan = scanImageFolder(o.source);
    if (QDir::cleanPath(target).startsWith(scan.source + QLatin1Char('/')) || target == scan.source)
        throw InvalidArgument(targetText + " is inside the folder being imported, " +
                              native(scan.source).toStdString());

    const std::vector<Item> items = importItems(scan, o);

    ImportResult result;
    result.ignored = scan.ignored;
    result.train.assign(std::size_t(scan.classes.size()), 0);
    result.test.assign(std::size_t(scan.classes.size()), 0);
    const ImportedSets d = decodeImages(items, scan, o, progress, cancel, result);
    const bool gray = d.gray;
    const int side = int(d.sets[0].height);

    std::vector<std::string> classes;
    for (const QString& c : scan.classes) classes.push_back(c.toStdString());
    result.spec = engine::importedDatasetSpec(
        name.toStdString(), engine::Shape{side, side, gray ? 1 : 3}, classes, o.mirrorSafe,
        "imported from " + native(scan.source).toStdString(), o.fit);
    engine::ManifestExtras extras;
    extras.source = native(scan.source).toStdString();
    extras.created = QDateTime::currentDateTimeUtc().toString(Qt::ISODate).toStdString();
    extras.trainCount = d.sets[0].count;
    extras.testCount = d.sets[1].count;
    writeImport(at, d, extras, int(classes.size()), o, cancel, result);
    result.nameNote = at.nameNote;
    return result;
}

} // namespace towers::app
