// towers-cli datasets: what discovery finds along the search path.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <algorithm>

#include "app/cli/command.h"
#include "app/data/data_dirs.h"
#include "engine/data/dataset.h"
#include "engine/data/dataset_manifest.h"

namespace towers::app {

bool searchPathOption(const QCommandLineParser& parser, CommandIo& io,
                      std::vector<std::filesystem::path>& path)
{
    const QString dir = parser.value(QStringLiteral("data-dir"));
    std::error_code ec;
    if (!dir.isEmpty() && !std::filesystem::is_directory(dir.toStdString(), ec)) {
        io.err << io.program << ": --data-dir: '" << dir << "' is not a folder\n";
        return false;
    }
    path = searchPathWith(dir);
    return true;
}

namespace {

// "cifar10, cifar100, mnist, fashion-mnist": the dataset table's names, each followed by `suffix`.
QString knownDatasetList(const QString& suffix)
{
    QStringList names;
    for (const std::string& n : engine::knownDatasets())
        names << QString::fromStdString(n) + suffix;
    return names.join(QStringLiteral(", "));
}

// Where an imported dataset's images came from (its manifest's "source"); empty for the table's.
QString importedFrom(const engine::DatasetInfo& d)
{
    if (engine::findDatasetSpec(d.name)) return {};
    try {
        engine::ManifestExtras extras;
        if (engine::readDatasetManifest(d.location, &extras))
            return QString::fromStdString(extras.source);
    } catch (const engine::Error&) {
    }
    return {};
}

// One dataset: where it is, its shape, and its images per class in both splits.
int showDataset(const QString& name, const QString& dataDir,
                const std::vector<std::filesystem::path>& path, bool json, CommandIo& io)
{
    // As train and eval load it: a copy in --data-dir is the one shown, and a damaged one there is
    // reported, never passed over for a copy elsewhere. DatasetNotFound, IoError.
    const engine::Dataset d =
        engine::loadDatasetPreferring(name.toStdString(), dataDir.toStdString(), path);
    const auto train = engine::classCounts(d.train, d.classNames.size());
    const auto test = engine::classCounts(d.test, d.classNames.size());
    if (json) {
        QJsonArray classes;
        for (std::size_t c = 0; c < d.classNames.size(); ++c)
            classes.append(
                QJsonObject{{QStringLiteral("class"), QString::fromStdString(d.classNames[c])},
                            {QStringLiteral("train"), qint64(train[c])},
                            {QStringLiteral("test"), qint64(test[c])}});
        io.out << QJsonDocument(
                      QJsonObject{
                          {QStringLiteral("name"), QString::fromStdString(d.name)},
                          {QStringLiteral("location"), QString::fromStdString(d.location.string())},
                          {QStringLiteral("train"), qint64(d.train.count)},
                          {QStringLiteral("test"), qint64(d.test.count)},
                          {QStringLiteral("image_shape"), shapeJson(d.train.imageShape())},
                          {QStringLiteral("fit"), QLatin1String(engine::imageFitName(d.imageFit))},
                          {QStringLiteral("classes"), classes}})
                      .toJson(QJsonDocument::Indented);
        return ExitOk;
    }
    io.out << QString::fromStdString(d.name) << " in "
           << QString::fromStdString(d.location.string()) << ": " << d.train.count << " training + "
           << d.test.count << " test images of " << shapeText(d.train.imageShape())
           << (d.imageFit == engine::ImageFit::Crop
                   ? QString()
                   : QStringLiteral(" (imported with --fit ") +
                         QLatin1String(engine::imageFitName(d.imageFit)) + QLatin1Char(')'))
           << ", " << d.classNames.size() << " classes\n\n";
    int width = 5;
    for (const auto& c : d.classNames)
        width = std::max(width, textColumns(QString::fromStdString(c)));
    io.out << "  " << QStringLiteral("class").leftJustified(width) << "     train      test\n";
    for (std::size_t c = 0; c < d.classNames.size(); ++c)
        io.out << "  " << padColumns(QString::fromStdString(d.classNames[c]), width)
               << QString::number(train[c]).rightJustified(10)
               << QString::number(test[c]).rightJustified(10) << "\n";
    const auto b = engine::classBalance(train);
    if (!b) return ExitOk;
    const auto nameOf = [&](std::size_t c) { return QString::fromStdString(d.classNames[c]); };
    if (b->fewestImages == 0)
        io.out << "\n" << nameOf(b->smallest) << " has no training image\n";
    else if (!b->even())
        io.out << "\nthe largest class has " << QString::number(b->ratio(), 'f', 1)
               << " times the training images of the smallest (" << nameOf(b->largest) << " "
               << b->mostImages << ", " << nameOf(b->smallest) << " " << b->fewestImages << ")\n";
    // Classes the network would see less than half as often as the largest: the remedy.
    if (b->smallClasses > 0)
        io.out << QString::fromStdString(
                      engine::counted(b->smallClasses, "class has", "classes have"))
               << " less than half the largest's training images: train with --sampling "
                  "balanced to see every class equally often\n";
    return ExitOk;
}

} // namespace

int runDatasets(const QStringList& args, CommandIo& io)
{
    QCommandLineParser p;
    p.setApplicationDescription(
        QStringLiteral("Lists the datasets found along the search path: --data-dir first, then "
                       "$TOWERS_DATA, the\n"
                       "user's data folder ($XDG_DATA_HOME/towers/datasets) and "
                       "/usr/share/datasets (Debian's\n"
                       "dataset-fashion-mnist). Each folder holds one sub-folder per dataset:\n"
                       "  %1.\n"
                       "Get the missing ones with 'towers-cli download NAME'. With a NAME, that "
                       "dataset in detail:\n"
                       "its images per class in the training and test sets.")
            .arg(knownDatasetList(QString())));
    p.addPositionalArgument(QStringLiteral("name"), QStringLiteral("A dataset to show in detail."),
                            QStringLiteral("[name]"));
    p.addOptions({
        {QStringLiteral("data-dir"), QStringLiteral("Search this folder first."),
         QStringLiteral("dir")},
        {QStringLiteral("json"), QStringLiteral("Print JSON.")},
    });
    int code = 0;
    if (!parseOrExplain(p, args, io, code)) return code;
    std::vector<std::filesystem::path> path;
    if (!searchPathOption(p, io, path)) return ExitUsage;
    if (p.positionalArguments().size() > 1) {
        io.err << "towers-cli datasets: one dataset at a time\n";
        return ExitUsage;
    }
    if (p.positionalArguments().size() == 1)
        return showDataset(p.positionalArguments().front(), p.value(QStringLiteral("data-dir")),
                           path, p.isSet(QStringLiteral("json")), io);
    const auto found = engine::discoverDatasets(path);
    // The folder the user named: say what of it was passed over, and why, rather than silently
    // listing copies from elsewhere.
    if (const QString dir = p.value(QStringLiteral("data-dir")); !dir.isEmpty()) {
        QStringList notes;
        bool holdsAny = false;
        for (const auto& name : engine::knownDatasets()) {
            const auto folder = engine::datasetFolderIn(name, dir.toStdString());
            if (!folder) continue;
            holdsAny = true;
            const auto it = std::find_if(found.begin(), found.end(),
                                         [&](const auto& d) { return d.name == name; });
            if (it != found.end() && it->location == *folder) continue;
            try {
                engine::inspectDataset(name, *folder);
                notes << QStringLiteral("%1's files are directly in %2: train or eval with "
                                        "--data-dir %2 --dataset %1 "
                                        "to use them")
                             .arg(QString::fromStdString(name), dir);
            } catch (const engine::Error& e) {
                notes << QStringLiteral("%1 in %2 was passed over: %3")
                             .arg(QString::fromStdString(name),
                                  QString::fromStdString(folder->string()),
                                  QString::fromUtf8(e.what()));
            }
        }
        holdsAny = holdsAny || !engine::importedDatasetNames({dir.toStdString()}).empty();
        if (!holdsAny)
            notes << QStringLiteral("--data-dir %1 holds no dataset: none of the folders %2 is in "
                                    "it, nor a dataset's "
                                    "files; what is listed comes from the rest of the search path")
                         .arg(dir, knownDatasetList(QStringLiteral("/")));
        for (const QString& n : notes) io.err << "towers-cli datasets: note: " << n << "\n";
    }
    QStringList missing;
    for (const auto& name : engine::knownDatasets()) {
        bool have = false;
        for (const auto& d : found) have = have || d.name == name;
        if (!have) missing << QString::fromStdString(name);
    }
    if (p.isSet(QStringLiteral("json"))) {
        QJsonArray list, searched, absent;
        for (const auto& d : found) {
            QJsonArray classes;
            for (const auto& c : d.classNames) classes.append(QString::fromStdString(c));
            QJsonObject entry{
                {QStringLiteral("name"), QString::fromStdString(d.name)},
                {QStringLiteral("location"), QString::fromStdString(d.location.string())},
                {QStringLiteral("train"), qint64(d.trainCount)},
                {QStringLiteral("test"), qint64(d.testCount)},
                {QStringLiteral("image_shape"), shapeJson(d.imageShape)},
                {QStringLiteral("classes"), classes}};
            if (const QString from = importedFrom(d); !from.isEmpty())
                entry.insert(QStringLiteral("imported_from"), from);
            list.append(entry);
        }
        for (const auto& f : path) searched.append(QString::fromStdString(f.string()));
        for (const auto& m : missing) absent.append(m);
        io.out << QJsonDocument(QJsonObject{{QStringLiteral("datasets"), list},
                                            {QStringLiteral("missing"), absent},
                                            {QStringLiteral("search_path"), searched}})
                      .toJson(QJsonDocument::Indented);
        return ExitOk;
    }
    if (found.empty()) io.out << "No dataset found.\n";
    qsizetype width = 14; // the names' column: the longest name and a space
    for (const auto& d : found) width = std::max(width, qsizetype(d.name.size()));
    for (const auto& d : found) {
        QStringList classes;
        for (const auto& c : d.classNames) classes << QString::fromStdString(c);
        io.out << QString::fromStdString(d.name).leftJustified(width) << " "
               << QString::fromStdString(d.location.string()) << "\n"
               << QString(width + 1, QLatin1Char(' ')) << d.trainCount << " train + " << d.testCount
               << " test images of " << shapeText(d.imageShape) << " (HxWxC), "
               << d.classNames.size() << " classes"
               << (importedFrom(d).isEmpty()
                       ? QString()
                       : QStringLiteral(" (imported from ") + importedFrom(d) + QStringLiteral(")"))
               << ": "
               << (classes.size() > 12
                       ? classes.mid(0, 12).join(QStringLiteral(", ")) + QStringLiteral(", ...")
                       : classes.join(QStringLiteral(", ")))
               << "\n";
    }
    if (!missing.isEmpty())
        io.out << "Not found: " << missing.join(QStringLiteral(", "))
               << " (get one with 'towers-cli download NAME'; make one from a folder of your "
                  "images with 'towers-cli import FOLDER')\n";
    io.out << "Searched: ";
    QStringList searched;
    for (const auto& f : path) searched << QString::fromStdString(f.string());
    io.out << searched.join(QStringLiteral(", ")) << "\n";
    return ExitOk;
}

} // namespace towers::app
