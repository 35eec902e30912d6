// Whole-set predictions against the engine's own evaluation of the same checkpoint (a separate
// path: evaluationBatch + evaluate): the same correct count and confusion matrix; cells list the
// right examples; progress and cancel.
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <atomic>

#include "app/inference/test_set_predictions.h"
#include "dataset_files.h"
#include "engine/models/registry.h"
#include "engine/train/checkpoint.h"
#include "engine/train/evaluation.h"
#include "engine/train/recipe.h"

using namespace towers;

class TestTestSetPredictions : public QObject
{
    Q_OBJECT
    QTemporaryDir m_dir;
    std::filesystem::path m_checkpoint;
    engine::Dataset m_data;

private slots:
    void initTestCase()
    {
        const std::filesystem::path root = m_dir.path().toStdString();
        test::writeIdxDataset(root / "mnist", 200, 300, 28, 28, false, 3);
        m_data = engine::loadDataset("mnist", root / "mnist");
        // A randomly initialised fashion-fast: its predictions are arbitrary but deterministic.
        auto model = engine::createModel("fashion-fast", 7);
        engine::CheckpointInfo info;
        info.model = "fashion-fast";
        info.dataset = "mnist";
        info.classNames = m_data.classNames;
        info.inputShape = model->inputShape();
        info.preprocessing =
            engine::preprocessingFor(engine::findModel("fashion-fast"), m_data).toJson();
        m_checkpoint = root / "ckpt.safetensors";
        engine::writeCheckpoint(m_checkpoint, engine::makeCheckpoint(*model, info));
    }

    void agreesWithEngineEvaluation()
    {
        engine::Classifier classifier(m_checkpoint);
        std::atomic<std::int64_t> done{0};
        const auto p = app::classifyTestSet(classifier, m_data.test, nullptr, &done,
                                            64); // chunks of 64: a partial last
        QCOMPARE(done.load(), m_data.test.count);
        QCOMPARE(p.examples(), m_data.test.count);
        const engine::EvalResult oracle = classifier.evaluate(m_data.test, 100);
        QCOMPARE(p.correct, oracle.correct);
        QCOMPARE(p.numClasses, oracle.numClasses);
        for (int t = 0; t < p.numClasses; ++t) {
            QCOMPARE(p.classCounts[std::size_t(t)], oracle.classCounts[std::size_t(t)]);
            for (int q = 0; q < p.numClasses; ++q)
                QCOMPARE(p.confusion[std::size_t(t * p.numClasses + q)], oracle.confusionAt(t, q));
        }
        QCOMPARE(p.accuracy(), oracle.precisionAt1);
        // The top 5 from the probabilities, as the evaluation counts them from the logits.
        QCOMPARE(p.correctTop5, oracle.correctTop5);
        QVERIFY(p.correctTop5 > p.correct && p.correctTop5 < p.examples());
        std::int64_t classesTop5 = 0;
        for (int t = 0; t < p.numClasses; ++t) {
            QCOMPARE(p.classTop5[std::size_t(t)], oracle.classTop5[std::size_t(t)]);
            classesTop5 += p.classTop5[std::size_t(t)];
        }
        QCOMPARE(classesTop5, p.correctTop5);
        QVERIFY(!p.hasTop5()); // ten classes
        // Cells list exactly the examples with that truth and prediction.
        std::int64_t listed = 0;
        for (int t = 0; t < p.numClasses; ++t)
            for (int q = 0; q < p.numClasses; ++q) {
                const auto cell = p.cell(t, q);
                QCOMPARE(std::int64_t(cell.size()), p.confusion[std::size_t(t * p.numClasses + q)]);
                for (std::size_t k = 0; k < cell.size(); ++k) {
                    const std::size_t i = std::size_t(cell[k]);
                    QCOMPARE(m_data.test.labels[i], t);
                    QCOMPARE(p.predicted[i], q);
                    if (k > 0) // the most confident first
                        QVERIFY(p.confidence[std::size_t(cell[k - 1])] >= p.confidence[i]);
                }
                listed += std::int64_t(cell.size());
            }
        QCOMPARE(listed, m_data.test.count);
        // Each confidence is the predicted class's probability, as the classifier gives it.
        const auto probs = classifier.probabilities(m_data.test);
        for (std::size_t i = 0; i < probs.size(); ++i)
            QCOMPARE(p.confidence[i], float(probs[i][std::size_t(p.predicted[i])]));
        // The confident mistakes: wrong ones only, the most confident first, no sure mistake
        // left out.
        const auto mistakes = p.confidentMistakes(10);
        QCOMPARE(mistakes.size(), std::size_t(10));
        float least = 2;
        for (std::size_t k = 0; k < mistakes.size(); ++k) {
            const std::size_t i = std::size_t(mistakes[k]);
            QVERIFY(p.truth[i] != p.predicted[i]);
            if (k > 0) QVERIFY(p.confidence[std::size_t(mistakes[k - 1])] >= p.confidence[i]);
            least = std::min(least, p.confidence[i]);
        }
        for (std::size_t i = 0; i < p.truth.size(); ++i)
            if (p.truth[i] != p.predicted[i] &&
                std::find(mistakes.begin(), mistakes.end(), std::int64_t(i)) == mistakes.end())
                QVERIFY(p.confidence[i] <= least);
        QCOMPARE(p.confidentMistakes(100000).size(), std::size_t(p.examples() - p.correct));
    }

    // Precision @ 5 as TensorFlow's in_top_k: the true class among the five highest logits, ties
    // at the fifth counted in; merged parts add up; reported for more than 10 classes.
    void topFiveAsInTopK()
    {
        engine::EvalResult r(12);
        engine::Tensor logits(engine::Shape{4, 12}, engine::DType::Float32);
        engine::Tensor labels(engine::Shape{4}, engine::DType::Int32);
        for (int i = 0; i < 4; ++i)
            for (int c = 0; c < 12; ++c) logits.setAt(i * 12 + c, double(c)); // class 11 highest
        const std::int32_t truth[4] = {11, 7, 6, 3};                          // ranks 1, 5, 6 and 9
        for (int i = 0; i < 4; ++i) labels.data<std::int32_t>()[i] = truth[i];
        r.add(logits, labels, 0);
        r.finish();
        QCOMPARE(r.correct, std::int64_t(1));
        QCOMPARE(r.correctTop5, std::int64_t(2));
        QCOMPARE(r.precisionAt5, 0.5);
        QVERIFY(r.hasTop5());
        // Class by class: 11's one example in, 7's in, 6's and 3's out.
        QCOMPARE(r.classTop5, (std::vector<std::int64_t>{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}));
        QCOMPARE(r.perClassTop5[7], 1.0);
        QCOMPARE(r.perClassTop5[6], 0.0);
        QCOMPARE(r.perClassTop5[0], 0.0); // no examples

        // A tie at the fifth place: classes 7 and 6 both score 7; both are in the top 5.
        engine::EvalResult tie(12);
        logits.setAt(2 * 12 + 6, 7.0);
        tie.add(logits, labels, 0);
        tie.merge(r);
        tie.finish();
        QCOMPARE(tie.correctTop5, std::int64_t(2 + 3));
        QCOMPARE(tie.examples, std::int64_t(8));
        QCOMPARE(tie.precisionAt5, 5.0 / 8.0);
        QCOMPARE(tie.classTop5[6], std::int64_t(1)); // in the tie's batch, not in r's
        QCOMPARE(tie.classTop5[7], std::int64_t(2));
        QCOMPARE(tie.perClassTop5[6], 0.5);

        // Ten classes: counted (five of ten), not reported.
        engine::EvalResult ten(10);
        QVERIFY(!ten.hasTop5());
    }

    // Precision, recall and F1 per class from a confusion matrix, worked out by hand; a class
    // never predicted, or without images, scores 0 without dividing by zero.
    void classScoresFromTheConfusion()
    {
        // rows: true class; 4 classes, the last with no images and never predicted.
        const std::vector<std::int64_t> confusion{8, 2, 0, 0, //
                                                  1, 3, 1, 0, //
                                                  4, 0, 0, 0, //
                                                  0, 0, 0, 0};
        const auto s = engine::classScores(confusion, 4);
        QCOMPARE(s.size(), std::size_t(4));
        QCOMPARE(s[0].images, std::int64_t(10));
        QCOMPARE(s[0].predicted, std::int64_t(13));
        QCOMPARE(s[0].recall, 0.8);
        QCOMPARE(s[0].precision, 8.0 / 13.0);
        QCOMPARE(s[0].f1, 2 * (8.0 / 13.0) * 0.8 / (8.0 / 13.0 + 0.8));
        QCOMPARE(s[1].precision, 0.6);
        QCOMPARE(s[1].recall, 0.6);
        QCOMPARE(s[1].f1, 0.6);
        QCOMPARE(s[2].recall, 0.0); // predicted once, wrongly; none of its 4 found
        QCOMPARE(s[2].precision, 0.0);
        QCOMPARE(s[2].f1, 0.0);
        QCOMPARE(s[3].images, std::int64_t(0));
        QCOMPARE(s[3].f1, 0.0);
        // The mean over the three classes with images.
        QCOMPARE(engine::macroF1(s), (s[0].f1 + s[1].f1 + s[2].f1) / 3);
        QVERIFY_THROWS_EXCEPTION(engine::InvalidArgument, engine::classScores(confusion, 3));
        // On a real evaluation, recall is the per-class accuracy the evaluation reports.
        engine::Classifier classifier(m_checkpoint);
        const engine::EvalResult r = classifier.evaluate(m_data.test, 100);
        const auto real = engine::classScores(r.confusion, r.numClasses);
        for (int c = 0; c < r.numClasses; ++c)
            QCOMPARE(real[std::size_t(c)].recall, r.perClassAccuracy[std::size_t(c)]);
    }

    void cancelStopsEarly()
    {
        engine::Classifier classifier(m_checkpoint);
        std::atomic<bool> cancel{true};
        std::atomic<std::int64_t> done{0};
        QVERIFY_THROWS_EXCEPTION(engine::Error,
                                 app::classifyTestSet(classifier, m_data.test, &cancel, &done, 50));
        QCOMPARE(done.load(), 0);
    }

    void wrongShapeIsRefused()
    {
        engine::Classifier classifier(m_checkpoint);
        engine::ImageSet colour;
        colour.count = 1;
        colour.height = colour.width = 32;
        colour.channels = 3;
        colour.pixels.assign(32 * 32 * 3, 0);
        colour.labels = {0};
        QVERIFY_THROWS_EXCEPTION(engine::InvalidArgument, app::classifyTestSet(classifier, colour));
    }
};

QTEST_GUILESS_MAIN(TestTestSetPredictions)
#include "tst_test_set_predictions.moc"
