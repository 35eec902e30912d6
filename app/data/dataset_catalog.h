#pragma once
// The datasets Towers can download: each one's files with their published URLs and MD5s and how
// the files become the dataset's folder under a data directory, in the downloader's Qt types. The
// facts themselves are the engine's dataset table (engine/data/dataset_spec.cpp: the entries with
// DatasetSpec::downloads). The downloader takes a DatasetSpec, so tests and mirrors can supply
// their own.
#include <QByteArray>
#include <QList>
#include <QString>
#include <QStringList>
#include <QUrl>
#include <optional>

namespace towers::app {

struct DatasetFile
{
    QString
        name; // the published file name; with a base-URL override it is fetched from <base>/<name>
    QUrl url; // where it is published
    QByteArray md5;   // the published MD5, 32 lowercase hex digits
    qint64 size = -1; // the published size in bytes when known (progress totals only), else -1
};

struct DatasetSpec
{
    QString name;        // "cifar10"
    QString description; // one line for listings
    QList<DatasetFile> files;
    // Empty: the files themselves, as published, make up the dataset folder.
    // Set: files holds exactly one .tar.gz, and the archive's folder of this name becomes the
    // dataset folder (its contents, nothing else from the archive).
    QString archiveRoot;
    // The files a complete dataset folder holds (what the readers need).
    QStringList requiredFiles;
    // The dataset's folder under the data directory; the name when empty. Datasets that read the
    // same files (cifar100 and cifar100-coarse) share it: one download serves both.
    QString folder;
    QString folderName() const { return folder.isEmpty() ? name : folder; }
};

// Every dataset of the engine's table that has downloads, in its order: CIFAR-10 and CIFAR-100
// (binary tar.gz; CIFAR-100 twice, by its fine and its coarse labels, in one folder), MNIST (the
// ossci mirror) and Fashion-MNIST (.gz files). A plain download's required files are its
// published files; an archive's, the files the engine's reader needs. The folder is the first of
// the entry's folder names.
const QList<DatasetSpec>& builtInDatasets();
// "cifar10, cifar100, cifar100-coarse, mnist, fashion-mnist" in that order.
QStringList builtInDatasetNames();
// The built-in spec called `name`, or nullopt.
std::optional<DatasetSpec> findBuiltInDataset(const QString& name);

// Checks that `spec` is usable: a name and a folder that are plain folder names, at least one file,
// every file with a plain name, a URL and a 32-digit hex MD5, exactly one .tar.gz when archiveRoot
// is set, required files that are plain relative paths. Throws engine::InvalidArgument saying what
// is wrong.
void validateDatasetSpec(const DatasetSpec& spec);

// True when `folder` holds every required file of `spec` as a non-empty regular file.
bool isDatasetComplete(const DatasetSpec& spec, const QString& folder);

} // namespace towers::app
