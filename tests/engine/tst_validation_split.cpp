// A validation set held out of a training set (splitValidation): the same share of each class,
// every image in exactly one part with its pixels and label, the order kept, the same draw for the
// same seed whatever else changes, and the counts that validationImages predicts.
#include <QtTest>

#include <map>
#include <set>

#include "engine/data/validation_split.h"
#include "engine/errors.h"

using namespace towers::engine;

namespace {

// `counts[c]` images of class c, interleaved, each image's bytes naming its index.
ImageSet makeSet(const std::vector<std::int64_t>& counts)
{
    ImageSet s;
    s.height = 2;
    s.width = 1;
    s.channels = 2;
    std::vector<std::int64_t> left = counts;
    for (bool more = true; more;) {
        more = false;
        for (std::size_t c = 0; c < left.size(); ++c) {
            if (left[c] == 0) continue;
            --left[c];
            more = true;
            const auto i = std::uint32_t(s.count);
            for (int b = 0; b < 4; ++b) s.pixels.push_back(std::uint8_t(i >> (8 * b)));
            s.labels.push_back(std::int32_t(c));
            ++s.count;
        }
    }
    return s;
}

std::int64_t indexOf(const ImageSet& s, std::int64_t i)
{
    const std::uint8_t* p = s.image(i);
    return std::int64_t(p[0]) | std::int64_t(p[1]) << 8 | std::int64_t(p[2]) << 16 |
           std::int64_t(p[3]) << 24;
}

std::vector<std::int64_t> indices(const ImageSet& s)
{
    std::vector<std::int64_t> out;
    for (std::int64_t i = 0; i < s.count; ++i) out.push_back(indexOf(s, i));
    return out;
}

} // namespace

class TestValidationSplit : public QObject
{
    Q_OBJECT
private slots:
    void eachClassGivesItsShare()
    {
        const std::vector<std::int64_t> counts{100, 37, 2, 1, 0, 9};
        const ImageSet set = makeSet(counts);
        const ValidationSplit split = splitValidation(set, 6, 0.1);
        QCOMPARE(split.train.count + split.validation.count, set.count);
        QCOMPARE(split.validation.count, validationImages(counts, 0.1));
        const auto held = classCounts(split.validation, 6);
        // round(n x 0.1), at least one of a class of two or more, none of a class of one.
        QCOMPARE(held, (std::vector<std::int64_t>{10, 4, 1, 0, 0, 1}));
        for (std::size_t c = 0; c < counts.size(); ++c)
            QCOMPARE(held[c], heldOutOfClass(counts[c], 0.1));
        QCOMPARE(heldOutOfClass(2, 0.5), std::int64_t(1));
        QCOMPARE(heldOutOfClass(3, 0.5), std::int64_t(2)); // round(1.5), still one left
        QCOMPARE(heldOutOfClass(1000, 0), std::int64_t(0));
        QCOMPARE(split.train.imageShape(), set.imageShape());
        QCOMPARE(split.validation.imageShape(), set.imageShape());
    }

    // Every image in exactly one part, with its own label, both parts in the set's order.
    void imagesKeepTheirLabelsAndOrder()
    {
        const ImageSet set = makeSet({50, 50, 50});
        const ValidationSplit split = splitValidation(set, 3, 0.2);
        std::set<std::int64_t> seen;
        for (const ImageSet* part : {&split.train, &split.validation}) {
            const auto order = indices(*part);
            QVERIFY(std::is_sorted(order.begin(), order.end()));
            for (std::int64_t i = 0; i < part->count; ++i) {
                const std::int64_t original = order[std::size_t(i)];
                QVERIFY(seen.insert(original).second);
                QCOMPARE(part->labels[std::size_t(i)], set.labels[std::size_t(original)]);
            }
            QCOMPARE(std::int64_t(part->pixels.size()), part->count * part->imageBytes());
        }
        QCOMPARE(std::int64_t(seen.size()), set.count);
        // validationIndex traces each validation image back to its place in the set.
        QCOMPARE(split.validationIndex, indices(split.validation));
    }

    // The draw depends on the seed, not on the call: a resume and every process of a run hold
    // out the same images; another seed others.
    void theSameSeedTheSameImages()
    {
        const ImageSet set = makeSet({200, 200});
        const auto a = indices(splitValidation(set, 2, 0.25).validation);
        const auto b = indices(splitValidation(set, 2, 0.25).validation);
        QCOMPARE(a, b);
        const auto other = indices(splitValidation(set, 2, 0.25, kValidationSeed + 1).validation);
        QCOMPARE(other.size(), a.size());
        QVERIFY(other != a);
        // Not simply the first images of each class.
        QVERIFY(a.back() > 100 * 2);
    }

    void noShareNoValidation()
    {
        const ImageSet set = makeSet({5, 5});
        const ValidationSplit split = splitValidation(set, 2, 0);
        QCOMPARE(split.validation.count, std::int64_t(0));
        QCOMPARE(split.train.pixels, set.pixels);
        QCOMPARE(split.train.labels, set.labels);
    }

    void refusals()
    {
        const ImageSet set = makeSet({5, 5});
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, splitValidation(set, 2, 0.6));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, splitValidation(set, 2, -0.1));
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, splitValidation(set, 1, 0.1)); // label 1
        QVERIFY_THROWS_EXCEPTION(InvalidArgument, splitValidation(set, 0, 0.1));
    }
};

QTEST_APPLESS_MAIN(TestValidationSplit)
#include "tst_validation_split.moc"
