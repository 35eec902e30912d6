#include "app/data/dataset_catalog.h"

#include <QFileInfo>

#include "engine/data/dataset_spec.h"
#include "engine/errors.h"

namespace towers::app {

namespace {

// The download of an engine dataset table entry (engine/data/dataset_spec.cpp, which holds the
// published URLs, sizes and MD5s of DATASETS.md).
DatasetSpec fromEngine(const engine::DatasetSpec& e)
{
    DatasetSpec spec;
    spec.name = QString::fromStdString(e.name);
    spec.description = QString::fromStdString(e.description);
    spec.folder = QString::fromStdString(e.folderNames.front());
    for (const engine::PublishedFile& f : e.downloads.files)
        spec.files.append({QString::fromStdString(f.name),
                           QUrl(QString::fromStdString(e.downloads.baseUrl + f.name)),
                           QByteArray::fromStdString(f.md5), f.size});
    spec.archiveRoot = QString::fromStdString(e.downloads.archiveRoot);
    if (spec.archiveRoot.isEmpty()) {
        // The published files, as they are, make up the folder.
        for (const auto& f : spec.files) spec.requiredFiles << f.name;
    } else {
        for (const std::string& f : e.readerFiles())
            spec.requiredFiles << QString::fromStdString(f);
    }
    return spec;
}

QList<DatasetSpec> makeBuiltIns()
{
    QList<DatasetSpec> specs;
    for (const engine::DatasetSpec& e : engine::datasetSpecs())
        if (!e.downloads.files.empty()) specs << fromEngine(e);
    return specs;
}

// A single path component that cannot climb out of, or hide in, the folder it is put in.
bool isPlainName(const QString& name)
{
    return !name.isEmpty() && !name.startsWith(QLatin1Char('.')) &&
           !name.contains(QLatin1Char('/')) && !name.contains(QChar(0));
}

bool isHexMd5(const QByteArray& md5)
{
    if (md5.size() != 32) return false;
    for (char c : md5)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

[[noreturn]] void invalid(const DatasetSpec& spec, const QString& what)
{
    throw engine::InvalidArgument(
        QStringLiteral("dataset '%1': %2").arg(spec.name, what).toStdString());
}

} // namespace

const QList<DatasetSpec>& builtInDatasets()
{
    static const QList<DatasetSpec> specs = makeBuiltIns();
    return specs;
}

QStringList builtInDatasetNames()
{
    QStringList names;
    for (const auto& s : builtInDatasets()) names << s.name;
    return names;
}

std::optional<DatasetSpec> findBuiltInDataset(const QString& name)
{
    for (const auto& s : builtInDatasets())
        if (s.name == name) return s;
    return std::nullopt;
}

void validateDatasetSpec(const DatasetSpec& spec)
{
    if (!isPlainName(spec.name))
        invalid(spec, QStringLiteral("the name must be a plain folder name (no '/', not starting "
                                     "with '.')"));
    if (!isPlainName(spec.folderName()))
        invalid(
            spec,
            QStringLiteral("the folder '%1' is not a plain folder name").arg(spec.folderName()));
    if (spec.files.isEmpty()) invalid(spec, QStringLiteral("no files to download"));
    for (const auto& f : spec.files) {
        if (!isPlainName(f.name))
            invalid(spec, QStringLiteral("file name '%1' is not a plain file name").arg(f.name));
        if (!f.url.isValid() || f.url.isRelative())
            invalid(
                spec,
                QStringLiteral("file '%1' has no valid URL ('%2')").arg(f.name, f.url.toString()));
        if (!isHexMd5(f.md5))
            invalid(spec, QStringLiteral("file '%1' has no valid MD5 (32 lowercase hex digits), "
                                         "got '%2'")
                              .arg(f.name, QString::fromLatin1(f.md5)));
        for (const auto& g : spec.files)
            if (&g != &f && g.name == f.name)
                invalid(spec, QStringLiteral("file '%1' is listed twice").arg(f.name));
    }
    if (!spec.archiveRoot.isEmpty()) {
        if (!isPlainName(spec.archiveRoot))
            invalid(spec, QStringLiteral("archive folder '%1' is not a plain folder name")
                              .arg(spec.archiveRoot));
        if (spec.files.size() != 1 || !spec.files.first().name.endsWith(QLatin1String(".tar.gz")))
            invalid(spec, QStringLiteral("an archive dataset needs exactly one .tar.gz file"));
    }
    if (spec.requiredFiles.isEmpty()) invalid(spec, QStringLiteral("no required files listed"));
    for (const auto& r : spec.requiredFiles) {
        const QStringList parts = r.split(QLatin1Char('/'));
        for (const auto& p : parts)
            if (!isPlainName(p))
                invalid(spec,
                        QStringLiteral("required file '%1' is not a plain relative path").arg(r));
    }
}

bool isDatasetComplete(const DatasetSpec& spec, const QString& folder)
{
    if (spec.requiredFiles.isEmpty()) return false;
    for (const auto& r : spec.requiredFiles) {
        const QFileInfo info(folder + QLatin1Char('/') + r);
        // A symbolic link to a file counts: users may link datasets they keep elsewhere.
        if (!info.isFile() || info.size() == 0) return false;
    }
    return true;
}

} // namespace towers::app
