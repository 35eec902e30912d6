#include "app/inference/classify_files.h"

#include "app/inference/image_files.h"
#include "engine/errors.h"

namespace towers::app {

namespace {

constexpr int kBatch = 64;

QByteArray csvField(const QString& text)
{
    QByteArray field = text.toUtf8();
    if (field.contains(',') || field.contains('"') || field.contains('\n') ||
        field.contains('\r')) {
        field.replace("\"", "\"\"");
        field = '"' + field + '"';
    }
    return field;
}

} // namespace

std::vector<FileAnswer> classifyFiles(engine::Classifier& classifier, const QStringList& files,
                                      int k, const std::atomic<bool>* cancel,
                                      const std::function<void(int, int)>& progress)
{
    const engine::Shape shape = classifier.sourceShape();
    std::vector<FileAnswer> answers;
    answers.reserve(std::size_t(files.size()));
    for (int begin = 0; begin < files.size(); begin += kBatch) {
        if (cancel && cancel->load()) break;
        const int end = std::min<int>(int(files.size()), begin + kBatch);
        engine::ImageSet set;
        set.height = shape[0];
        set.width = shape[1];
        set.channels = shape[2];
        std::vector<std::size_t> rows; // the answers that have an image in `set`, in order
        for (int i = begin; i < end; ++i) {
            FileAnswer a;
            a.file = files[i];
            try {
                appendImage(readImageFile(files[i], shape), shape, set, classifier.info().imageFit);
                a.input = toQImage(set, set.count - 1);
                rows.push_back(answers.size());
            } catch (const engine::Error& e) {
                a.error = QString::fromUtf8(e.what());
                if (!a.error.contains(files[i]))
                    a.error = files[i] + QStringLiteral(": ") + a.error;
            }
            answers.push_back(std::move(a));
        }
        if (set.count > 0) {
            const auto logits = classifier.logits(set);
            for (std::size_t j = 0; j < rows.size(); ++j) {
                FileAnswer& a = answers[rows[j]];
                a.logits = logits[j];
                a.top = engine::Classifier::topK(engine::Classifier::softmax(a.logits), k);
            }
        }
        if (progress) progress(end, int(files.size()));
    }
    return answers;
}

QByteArray answersCsv(const std::vector<FileAnswer>& answers,
                      const std::vector<std::string>& classNames, int k)
{
    QByteArray csv = "file";
    for (int i = 1; i <= k; ++i)
        csv += ",class " + QByteArray::number(i) + ",probability " + QByteArray::number(i);
    csv += ",error\r\n";
    for (const FileAnswer& a : answers) {
        csv += csvField(a.file);
        for (int i = 0; i < k; ++i) {
            if (std::size_t(i) < a.top.size()) {
                const auto& s = a.top[std::size_t(i)];
                const QString name = std::size_t(s.label) < classNames.size()
                                         ? QString::fromStdString(classNames[std::size_t(s.label)])
                                         : QString::number(s.label);
                csv += ',' + csvField(name) + ',' + QByteArray::number(s.probability, 'g', 6);
            } else {
                csv += ",,";
            }
        }
        csv += ',' + csvField(a.error) + "\r\n";
    }
    return csv;
}

} // namespace towers::app
