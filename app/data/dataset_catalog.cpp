#include "app/data/dataset_catalog.h"

#include <QFileInfo>

#include "engine/errors.h"

namespace towers::app {

namespace {

DatasetFile file(const char* base, const char* name, const char* md5, qint64 size)
{
    return {QString::fromLatin1(name), QUrl(QString::fromLatin1(base) + QString::fromLatin1(name)),
            QByteArray(md5), size};
}

QList<DatasetSpec> makeBuiltIns()
{
    // URLs and MD5s as published (DATASETS.md). The MNIST and Fashion-MNIST sizes are those of
    // the published .gz files; they only size the progress bar before the server answers.
    const char* toronto = "https://www.cs.toronto.edu/~kriz/";
    const char* mnist = "https://ossci-datasets.s3.amazonaws.com/mnist/";
    // The Fashion-MNIST bucket is an S3 website endpoint, which serves plain HTTP only; the MD5
    // check is what vouches for these bytes.
    const char* fashion = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/";
    const QStringList idxFiles{
        QStringLiteral("train-images-idx3-ubyte.gz"), QStringLiteral("train-labels-idx1-ubyte.gz"),
        QStringLiteral("t10k-images-idx3-ubyte.gz"), QStringLiteral("t10k-labels-idx1-ubyte.gz")};
    return {
        {QStringLiteral("cifar10"),
         QStringLiteral(
             "CIFAR-10, binary version: 50,000 + 10,000 colour images 32x32, 10 classes"),
         {file(toronto, "cifar-10-binary.tar.gz", "c32a1d4ab5d03f1284b67883e8d87530", 170052171)},
         QStringLiteral("cifar-10-batches-bin"),
         {QStringLiteral("data_batch_1.bin"), QStringLiteral("data_batch_2.bin"),
          QStringLiteral("data_batch_3.bin"), QStringLiteral("data_batch_4.bin"),
          QStringLiteral("data_batch_5.bin"), QStringLiteral("test_batch.bin"),
          QStringLiteral("batches.meta.txt")}},
        {QStringLiteral("cifar100"),
         QStringLiteral(
             "CIFAR-100, binary version: 50,000 + 10,000 colour images 32x32, 100 classes"),
         {file(toronto, "cifar-100-binary.tar.gz", "03b5dce01913d631647c71ecec9e9cb8", 168513733)},
         QStringLiteral("cifar-100-binary"),
         {QStringLiteral("train.bin"), QStringLiteral("test.bin"),
          QStringLiteral("coarse_label_names.txt"), QStringLiteral("fine_label_names.txt")}},
        {QStringLiteral("mnist"),
         QStringLiteral("MNIST: 60,000 + 10,000 handwritten digits 28x28, 10 classes"),
         {file(mnist, "train-images-idx3-ubyte.gz", "f68b3c2dcbeaaa9fbdd348bbdeb94873", 9912422),
          file(mnist, "train-labels-idx1-ubyte.gz", "d53e105ee54ea40749a09fcbcd1e9432", 28881),
          file(mnist, "t10k-images-idx3-ubyte.gz", "9fb629c4189551a2d022fa330f9573f3", 1648877),
          file(mnist, "t10k-labels-idx1-ubyte.gz", "ec29112dd5afa0611ce80d1b7f02629c", 4542)},
         QString(),
         idxFiles},
        {QStringLiteral("fashion-mnist"),
         QStringLiteral("Fashion-MNIST: 60,000 + 10,000 clothing images 28x28, 10 classes"),
         {file(fashion, "train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d", 26421880),
          file(fashion, "train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe", 29515),
          file(fashion, "t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79", 4422102),
          file(fashion, "t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310", 5148)},
         QString(),
         idxFiles},
    };
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
