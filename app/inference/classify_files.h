#pragma once
// Many image files through one classifier, for `towers-cli classify` and the Classify page's
// "Classify many" window: each file read by app::readImageFile (the same pixels and limits
// everywhere), in batches; a file that cannot be read is answered with its reason and the others
// go on.
// Cancellable between batches; progress after each.
#include <QImage>
#include <QString>
#include <QStringList>

#include <atomic>
#include <functional>
#include <vector>

#include "engine/train/classifier.h"

namespace towers::app {

struct FileAnswer
{
    QString file;
    QString error;                       // why it was not classified; empty when it was
    std::vector<engine::ClassScore> top; // most probable first
    std::vector<double> logits;          // every class's, in label order
    QImage input;                        // what the model saw (the dataset's size), when read
};

// Answers for `files`, in their order, with the `k` most probable classes each. Stops early,
// with answers for the files done, when `cancel` becomes true; `progress(done, total)` after
// each batch. Exceptions from the classifier itself (not from a file) propagate.
std::vector<FileAnswer> classifyFiles(engine::Classifier& classifier, const QStringList& files,
                                      int k, const std::atomic<bool>* cancel = nullptr,
                                      const std::function<void(int, int)>& progress = {});

// The answers as CSV (RFC 4180): file, then class and probability for each of the top k, then
// the error; a header line first.
QByteArray answersCsv(const std::vector<FileAnswer>& answers,
                      const std::vector<std::string>& classNames, int k);

} // namespace towers::app
