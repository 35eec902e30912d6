// The input pipeline. A batch is a pure function of (seed, step): the epoch's permutation comes
// from (seed, epoch) and each example slot's distortions from (seed, step, slot), so workers may
// build batches in any order and on any thread. Workers claim steps in order and build them into
// a ring of slots (the bounded prefetch queue); the consumer takes them in step order.
#include "engine/data/batch_loader.h"

#include "engine/data/class_balance.h"
#include "engine/data/distortion_math.h"
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace towers::engine {

namespace {

// Distinct streams for the permutations and the per-example distortions of one seed.
constexpr std::uint64_t kPermutationStream = 0x7065726d75746174ull;
constexpr std::uint64_t kExampleStream = 0x6578616d706c6573ull;

std::uint64_t mix(std::uint64_t a, std::uint64_t b)
{
    return splitmix64(a ^ splitmix64(b));
}

std::uint64_t permutationSeed(std::uint64_t seed, std::int64_t epoch)
{
    return mix(mix(seed, kPermutationStream), static_cast<std::uint64_t>(epoch));
}

std::uint64_t exampleSeed(std::uint64_t seed, std::int64_t step, std::int64_t slot)
{
    return mix(mix(mix(seed, kExampleStream), static_cast<std::uint64_t>(step)),
               static_cast<std::uint64_t>(slot));
}

// The one place batch memory is allocated: page-locked for GPU towers, whose copies from it run
// at the bus's full speed.
Batch allocateBatch(int towers, std::int64_t global, const Preprocessing& p, const LoaderOptions& o)
{
    Batch b;
    const auto make = [&](const Shape& shape, DType type) {
        return o.pinned ? Tensor::pinned(shape, type) : Tensor(shape, type);
    };
    if (o.drawsOnly)
        b.draws = make({global, preprocess::kDrawColumns}, DType::Float64);
    else
        b.images = make({global, p.height, p.width, p.channels}, DType::Float32);
    b.labels = make({global}, DType::Int32);
    b.towers = towers;
    b.step = -1;
    return b;
}

double millisecondsSince(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

struct BatchLoader::Impl
{
    enum class SlotState
    {
        Free,
        Filling,
        Ready,
        Failed
    };
    struct Slot
    {
        Batch batch;
        std::int64_t step = -1;
        SlotState state = SlotState::Free;
        std::exception_ptr error;
    };

    Impl(const ImageSet& s, Preprocessing r, LoaderOptions o)
        : set(s), recipe(std::move(r)), options(std::move(o))
    {
    }

    const ImageSet& set;
    const Preprocessing recipe;
    const LoaderOptions options;
    std::int64_t global = 0, steps = 0;
    std::int64_t local = 0, firstSlot = 0; // this loader's slots of the global batch
    std::size_t imageFloats = 0;
    std::vector<std::vector<std::int64_t>> byClass; // LoaderOptions::balanced: each class's images

    // Permutations of recent epochs, shared by the workers (an epoch boundary may be in flight).
    std::mutex permutationMutex;
    std::vector<std::pair<std::int64_t, std::shared_ptr<const std::vector<std::int64_t>>>>
        permutations;

    // Bumped by seek and the destructor: work of an older generation is abandoned.
    std::atomic<std::uint64_t> generation{0};

    // Synchronous mode (workers == 0).
    Batch current;

    // Threaded mode: everything below is guarded by `mutex`.
    std::mutex mutex;
    std::condition_variable workAvailable, batchReady;
    std::vector<Slot> slots;    // the prefetch queue plus the slot the consumer holds
    std::int64_t nextStep = 0;  // what next() returns next
    std::int64_t claimStep = 0; // what the next idle worker builds
    bool holding = false;       // the consumer holds the batch of nextStep - 1
    bool stopping = false;
    std::vector<std::thread> threads;

    double lastWait = 0;

    std::shared_ptr<const std::vector<std::int64_t>> permutation(std::int64_t epoch)
    {
        std::lock_guard lock(permutationMutex);
        for (const auto& [e, p] : permutations)
            if (e == epoch) return p;
        // From the epoch's own generator.
        Rng rng(permutationSeed(options.seed, epoch));
        auto p = std::make_shared<std::vector<std::int64_t>>(
            options.balanced ? balancedOrder(byClass, set.count, rng) : rng.permutation(set.count));
        permutations.emplace_back(epoch, p);
        if (permutations.size() > 4) permutations.erase(permutations.begin());
        return p;
    }

    // Builds the batch of `step`; false when abandoned (generation changed).
    bool fill(Batch& b, std::int64_t step, std::uint64_t gen)
    {
        const std::int64_t epoch = step / steps;
        const std::int64_t first = (step % steps) * global;
        std::shared_ptr<const std::vector<std::int64_t>> perm;
        if (options.shuffle) perm = permutation(epoch);
        float* images = options.drawsOnly ? nullptr : b.images.data<float>();
        double* draws = options.drawsOnly ? b.draws.data<double>() : nullptr;
        std::int32_t* labels = b.labels.data<std::int32_t>();
        const Shape source = set.imageShape();
        const auto exampleAt = [&](std::int64_t k) {
            return perm ? (*perm)[static_cast<std::size_t>(first + k)] : first + k;
        };
        const std::size_t imageBytes = static_cast<std::size_t>(set.imageBytes());
        const std::int64_t endSlot = firstSlot + local;
        for (std::int64_t k = firstSlot; k < endSlot; ++k) {
            if ((k & 7) == 0 && generation.load(std::memory_order_relaxed) != gen) return false;
            const std::int64_t index = exampleAt(k);
            // Shuffled examples are scattered over the set: fetch the next one's bytes while this
            // one is worked on.
            if (images && k + 1 < endSlot) {
                const char* nextImage = reinterpret_cast<const char*>(set.image(exampleAt(k + 1)));
                for (std::size_t off = 0; off < imageBytes; off += 64)
                    __builtin_prefetch(nextImage + off);
            }
            Rng rng(exampleSeed(options.seed, step, k));
            const Distortion d = options.augment ? drawDistortion(recipe, source, rng)
                                                 : centralDistortion(recipe, source);
            if (draws)
                preprocess::packDraw(index, imageDraw(d),
                                     draws + (k - firstSlot) * preprocess::kDrawColumns);
            else
                applyPreprocessing(recipe, set.image(index), source, d,
                                   images + static_cast<std::size_t>(k - firstSlot) * imageFloats);
            labels[k - firstSlot] = set.labels[static_cast<std::size_t>(index)];
        }
        b.step = step;
        b.epoch = epoch;
        b.towers = options.towers;
        if (options.check) options.check(b);
        return true;
    }

    std::int64_t slotCount() const { return static_cast<std::int64_t>(slots.size()); }
    Slot& slotOf(std::int64_t step) { return slots[static_cast<std::size_t>(step % slotCount())]; }

    bool canClaim()
    {
        const std::int64_t windowStart = holding ? nextStep - 1 : nextStep;
        return claimStep < windowStart + slotCount() && slotOf(claimStep).state == SlotState::Free;
    }

    void workerLoop()
    {
        std::unique_lock lock(mutex);
        for (;;) {
            workAvailable.wait(lock, [&] { return stopping || canClaim(); });
            if (stopping) return;
            const std::int64_t step = claimStep++;
            Slot& slot = slotOf(step);
            slot.state = SlotState::Filling;
            slot.step = step;
            slot.error = nullptr;
            const std::uint64_t gen = generation.load();
            lock.unlock();

            std::exception_ptr error;
            bool finished = true;
            try {
                finished = fill(slot.batch, step, gen);
            } catch (...) {
                error = std::current_exception();
            }

            lock.lock();
            if (!finished || gen != generation.load()) {
                // Abandoned by seek or the destructor: the slot is free for the new stream.
                slot.state = SlotState::Free;
                slot.step = -1;
                workAvailable.notify_all();
            } else {
                slot.state = error ? SlotState::Failed : SlotState::Ready;
                slot.error = error;
                batchReady.notify_all();
            }
        }
    }
};

BatchLoader::BatchLoader(const ImageSet& set, Preprocessing recipe, LoaderOptions options)
{
    const auto bad = [](const std::string& why) { throw InvalidArgument("batch loader: " + why); };
    if (options.towers < 1 || options.towers > 4096)
        bad("towers is " + std::to_string(options.towers) + ", expected 1..4096");
    if (options.batchPerTower < 1)
        bad("batch per tower is " + std::to_string(options.batchPerTower) +
            ", expected at least 1");
    if (options.workers < 0 || options.workers > 256)
        bad("workers is " + std::to_string(options.workers) + ", expected 0..256");
    if (options.prefetch < 0 || options.prefetch > 4096)
        bad("prefetch is " + std::to_string(options.prefetch) + ", expected 0..4096");
    if (set.count < 1) bad("the image set is empty");
    if (set.pixels.size() != static_cast<std::size_t>(set.count * set.imageBytes()) ||
        set.labels.size() != static_cast<std::size_t>(set.count))
        bad("the image set is inconsistent: " + std::to_string(set.count) + " images of " +
            set.imageShape().str() + ", " + std::to_string(set.pixels.size()) + " pixel bytes, " +
            std::to_string(set.labels.size()) + " labels");
    for (std::size_t i = 0; i < set.labels.size(); ++i)
        if (set.labels[i] < 0) bad("example " + std::to_string(i) + " has a negative label");
    const int globalTowers = options.globalTowers > 0 ? options.globalTowers : options.towers;
    if (options.globalTowers < 0 || options.firstTower < 0 ||
        options.firstTower + options.towers > globalTowers)
        bad("towers " + std::to_string(options.firstTower) + ".." +
            std::to_string(options.firstTower + options.towers - 1) + " are not among the " +
            std::to_string(globalTowers) + " global towers");
    const std::int64_t global = std::int64_t(globalTowers) * options.batchPerTower;
    if (global > set.count)
        bad("a global batch of " + std::to_string(global) + " (" +
            counted(globalTowers, "tower", "towers") + " x " +
            std::to_string(options.batchPerTower) + ") is larger than the " +
            std::to_string(set.count) + " examples: " +
            (set.count >= globalTowers
                 ? "a batch size of at most " + std::to_string(set.count / globalTowers) +
                       " per tower fits"
                 : "at most " + std::to_string(set.count) + " towers of 1 example fit"));
    recipe.validateFor(set.imageShape());

    m = std::make_unique<Impl>(set, std::move(recipe), std::move(options));
    m->global = global;
    m->local = std::int64_t(m->options.towers) * m->options.batchPerTower;
    m->firstSlot = std::int64_t(m->options.firstTower) * m->options.batchPerTower;
    m->steps = set.count / global;
    if (m->options.balanced) m->byClass = examplesByClass(set.labels);
    m->imageFloats = static_cast<std::size_t>(m->recipe.height) *
                     static_cast<std::size_t>(m->recipe.width) *
                     static_cast<std::size_t>(m->recipe.channels);
    const LoaderOptions& o = m->options;
    if (o.workers == 0) {
        m->current = allocateBatch(o.towers, m->local, m->recipe, o);
        return;
    }
    const int prefetch = o.prefetch > 0 ? o.prefetch : 2 * o.towers;
    m->slots.resize(static_cast<std::size_t>(prefetch) + 1); // + the one the consumer holds
    for (Impl::Slot& slot : m->slots) slot.batch = allocateBatch(o.towers, m->local, m->recipe, o);
    try {
        for (int w = 0; w < o.workers; ++w) m->threads.emplace_back([this] { m->workerLoop(); });
    } catch (...) {
        {
            std::lock_guard lock(m->mutex);
            m->stopping = true;
        }
        m->workAvailable.notify_all();
        for (std::thread& t : m->threads) t.join();
        throw;
    }
}

BatchLoader::~BatchLoader()
{
    {
        std::lock_guard lock(m->mutex);
        m->stopping = true;
        ++m->generation; // workers abandon the batch they are building
    }
    m->workAvailable.notify_all();
    for (std::thread& t : m->threads) t.join();
}

std::int64_t BatchLoader::stepsPerEpoch() const
{
    return m->steps;
}

void BatchLoader::seek(std::int64_t step)
{
    if (step < 0)
        throw InvalidArgument("batch loader: cannot seek to step " + std::to_string(step));
    if (m->threads.empty()) {
        m->nextStep = step;
        return;
    }
    {
        std::lock_guard lock(m->mutex);
        ++m->generation;
        // Queued batches are dropped now; the ones being built are dropped by their workers,
        // which free their slots when they notice (within a few examples).
        for (Impl::Slot& slot : m->slots)
            if (slot.state != Impl::SlotState::Filling) {
                slot.state = Impl::SlotState::Free;
                slot.step = -1;
                slot.error = nullptr;
            }
        m->nextStep = m->claimStep = step;
        m->holding = false;
    }
    m->workAvailable.notify_all();
}

const Batch& BatchLoader::next()
{
    const auto t0 = std::chrono::steady_clock::now();
    if (m->threads.empty()) {
        m->fill(m->current, m->nextStep, m->generation.load());
        m->lastWait = millisecondsSince(t0);
        ++m->nextStep;
        return m->current;
    }
    std::unique_lock lock(m->mutex);
    if (m->holding) {
        Impl::Slot& held = m->slotOf(m->nextStep - 1);
        held.state = Impl::SlotState::Free;
        held.step = -1;
        m->holding = false;
        m->workAvailable.notify_all();
    }
    Impl::Slot& slot = m->slotOf(m->nextStep);
    const auto ready = [&] {
        return slot.step == m->nextStep &&
               (slot.state == Impl::SlotState::Ready || slot.state == Impl::SlotState::Failed);
    };
    m->lastWait = 0;
    if (!ready()) {
        m->batchReady.wait(lock, ready);
        m->lastWait = millisecondsSince(t0);
    }
    if (slot.state == Impl::SlotState::Failed) std::rethrow_exception(slot.error);
    m->holding = true;
    ++m->nextStep;
    return slot.batch;
}

double BatchLoader::lastWaitMs() const
{
    return m->lastWait;
}

void evaluationBatch(const ImageSet& set, const Preprocessing& recipe, std::int64_t begin,
                     std::int64_t end, Tensor& images, Tensor& labels)
{
    if (begin < 0 || end < begin || end > set.count)
        throw InvalidArgument("evaluationBatch: examples [" + std::to_string(begin) + ", " +
                              std::to_string(end) + ") are outside the set of " +
                              std::to_string(set.count));
    if (set.pixels.size() < static_cast<std::size_t>(set.count * set.imageBytes()) ||
        set.labels.size() < static_cast<std::size_t>(set.count))
        throw InvalidArgument("evaluationBatch: the image set is inconsistent");
    recipe.validateFor(set.imageShape());
    const std::int64_t n = end - begin;
    Tensor::ensure(images, Shape{n, recipe.height, recipe.width, recipe.channels}, DType::Float32);
    Tensor::ensure(labels, Shape{n}, DType::Int32);
    const Shape source = set.imageShape();
    const Distortion central = centralDistortion(recipe, source);
    const std::size_t floats =
        static_cast<std::size_t>(recipe.height) * recipe.width * recipe.channels;
    float* out = n ? images.data<float>() : nullptr;
    std::int32_t* lab = n ? labels.data<std::int32_t>() : nullptr;
    for (std::int64_t i = 0; i < n; ++i) {
        applyPreprocessing(recipe, set.image(begin + i), source, central,
                           out + static_cast<std::size_t>(i) * floats);
        lab[i] = set.labels[static_cast<std::size_t>(begin + i)];
    }
}

void imagesOfDraws(const ImageSet& set, const Preprocessing& recipe, const Tensor& draws,
                   std::int64_t count, Tensor& images)
{
    if (draws.rank() != 2 || draws.dim(1) != preprocess::kDrawColumns ||
        draws.dtype() != DType::Float64 || count < 0 || count > draws.dim(0))
        throw InvalidArgument("imagesOfDraws: " + std::to_string(count) + " images from draws " +
                              draws.describe());
    recipe.validateFor(set.imageShape());
    Tensor::ensure(images, Shape{count, recipe.height, recipe.width, recipe.channels},
                   DType::Float32);
    const Tensor host = draws.onHost();
    const std::size_t floats =
        static_cast<std::size_t>(recipe.height) * recipe.width * recipe.channels;
    for (std::int64_t i = 0; i < count; ++i) {
        const double* row = host.data<double>() + i * preprocess::kDrawColumns;
        if (!preprocess::drawFits(row, set.count, set.height, set.width, recipe.height,
                                  recipe.width))
            throw InvalidArgument("imagesOfDraws: draw row " + std::to_string(i) +
                                  " does not fit the set");
        applyPreprocessing(recipe, set.image(preprocess::drawIndex(row)), set.imageShape(),
                           distortionOf(preprocess::unpackDraw(row)),
                           images.data<float>() + static_cast<std::size_t>(i) * floats);
    }
}

} // namespace towers::engine
