#pragma once
// A dataset made from the user's own images, as NVIDIA DIGITS made one: a folder with one
// sub-folder per class (its name is the class's), or with train/ and test/ (or val/) folders each
// holding the class folders. Every image is decoded as `towers-cli classify` decodes one
// (app/inference/image_files.h: the centre cropped square, scaled to the chosen size), and the
// dataset is written into the data folder as engine/data/dataset_manifest.h describes (IDX files
// and towers-dataset.json), so that every command and page finds it by name.
//
// Nothing is lost or left half-made: the dataset is written into a hidden temporary folder and
// renamed into place when complete; an existing dataset of that name is replaced only when asked
// (and only when it is an imported dataset); a file that is no image, or a damaged image, is
// passed over and reported, never fatal, unless no image of a class is left.
#include <QString>
#include <QStringList>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "engine/data/dataset.h"
#include "engine/data/dataset_spec.h"

namespace towers::app {

inline constexpr int kMinImportSide = 8;
inline constexpr int kMaxImportSide = 256;

struct ImportOptions
{
    QString source;   // the folder of class folders (or of train/ and test/)
    QString name;     // the dataset's name; empty: made from the source folder's name
    QString dataDir;  // where the dataset's folder is made; empty: defaultDataDir()
    int size = 0;     // the images' side in pixels; 0: 28 for grayscale, 32 for colour
    int channels = 0; // 1 or 3; 0: 1 when every image is gray, else 3
    // The share of each class's images held out as the test set when the source has no test
    // folder (at least one image of every class with two or more).
    double testFraction = 0.1;
    bool mirrorSafe = true; // whether a left-right mirror keeps an image's class (flips)
    // How each image is brought to the size (engine::ImageFit: the centre cropped, the whole
    // squashed, or the whole fitted inside on black); the manifest records it for classify.
    engine::ImageFit fit = engine::ImageFit::Crop;
    bool overwrite = false; // replace an imported dataset of the same name
    // How the user asks for `overwrite`, for the message when a dataset of the name exists
    // ("--force", the dialog's check box).
    QString overwriteHint = QStringLiteral("--force");
    std::uint64_t seed = 1; // which images are held out
};

// What scanning the source found, without decoding anything.
struct ImageFolderScan
{
    QString source;
    bool splitFolders = false; // train/ and test/ (or val/) folders
    QString testFolder;        // "test", "val" or "validation" when splitFolders
    QStringList classes;       // sorted; a folder without image files is none
    // Each class's image files, sorted: all of them without split folders; with them, those of
    // train/ and those of the test folder.
    std::vector<QStringList> trainFiles, testFiles;
    // Files that are no image (by their suffix), and links passed over (to the imported folder or
    // above it; to a folder or image read already, each folder and image file being read for one
    // class of one split only: "a/more/ (a link to a folder read already: class b)"), relative
    // paths.
    QStringList ignored;
    std::vector<qint64> trainCounts() const; // image files per class (of train/)
    qint64 images() const;
};

struct ImportResult
{
    QString folder; // the dataset's folder
    engine::DatasetSpec spec;
    std::vector<qint64> train, test; // images per class written
    // Each image that could not be read: its path, exactly, and why.
    struct Unreadable
    {
        QString path;
        QString reason;
    };
    std::vector<Unreadable> unreadable;
    // The same as lines to show, "file: reason", the file as quotedPath() shows it.
    QStringList skipped;
    QStringList ignored; // files that are no image, links passed over (the scan's)
    // Why the name is what it is, when it was made from the folder's name and letters of that
    // had to be left out (datasetNameFromFolder's note); empty otherwise.
    QString nameNote;
    qint64 trainImages() const; // the sums of `train` and `test`
    qint64 testImages() const;
};

// The image file each example of an imported dataset was decoded from, in the order of its IDX
// records: written by importImageFolder into the dataset's folder beside the manifest, as JSON
// {"train": [paths], "test": [paths]} (the paths as the import read them: under the imported
// folder), so that an example named by its index (eval --mistakes) is traced back to its file.
inline constexpr const char* kImportedFilesName = "towers-files.json";
struct ImportedFiles
{
    QStringList train, test;
};
// The lists of the dataset in `folder`; nullopt when it has none (a dataset imported before they
// were written, or one of the table's) or when they do not read as such lists.
std::optional<ImportedFiles> readImportedFiles(const QString& folder);
// The image files of examples of `data` as its import recorded them (readImportedFiles of its
// folder): those of its training set, its test set, or both (training then test, as eval --set
// all orders them); with `validationIndex`, the training images it names (a validation set drawn
// from them, ValidationSplit::validationIndex), in its order. Empty when the dataset has no record
// of its files, or a record of other examples (the counts differ).
QStringList importedImageFiles(const engine::Dataset& data, bool train, bool test,
                               const std::vector<std::int64_t>* validationIndex = nullptr);

// `path` as it is when it holds only printable characters; else in double quotes, a newline, tab
// or carriage return as \n, \t, \r, a quote or backslash escaped, any other unprintable
// character as \uXXXX: so that a file name with a newline shows on one line as what it is.
QString quotedPath(const QString& path);

// A name made from `folder`'s name: lowercased, other letters in ASCII where Unicode gives them a
// form ("ÜBER" is "uber", "Straße" "strasse": dataset names are ASCII), runs of other characters
// as '-', at most 64 characters; "images" when nothing is left, and "<name>-images" for a name of
// the table's. `note`, when given, is set to why the name is what it is when letters or digits of
// the folder's name had no ASCII form and were left out ("日本" is "images"), else cleared.
QString datasetNameFromFolder(const QString& folder, QString* note = nullptr);

// Lists the classes and image files of `source`. Throws engine::IoError naming the folder when it
// is missing or unreadable, engine::InvalidArgument when it holds fewer than two classes with
// images, more than kMaxImportedClasses, or a test folder with a class the training one lacks.
ImageFolderScan scanImageFolder(const QString& source);

// Imports `options.source`. `progress` (may be empty) is called with the images done and the total
// from the calling thread; `cancel`, when set during the import, stops it (engine::Error
// "cancelled"), leaving nothing behind. Throws engine::InvalidArgument for bad options (a bad name,
// size or fraction; a dataset of that name that is not to be replaced), engine::IoError for a
// folder that cannot be read or written (a full disk), both naming what and where.
ImportResult importImageFolder(const ImportOptions& options,
                               const std::function<void(qint64 done, qint64 total)>& progress = {},
                               const std::atomic<bool>* cancel = nullptr);

} // namespace towers::app
