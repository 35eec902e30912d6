#include "synthetic_batches.h"

#include <cmath>
#include <limits>
#include <numeric>

#include "engine/tensor/rng.h"

namespace towers::test {

using namespace engine;

SyntheticBatches::SyntheticBatches(Shape imageShape, int classes, int towers, int batchPerTower,
                                   std::int64_t examples, std::uint64_t seed)
    : m_shape(std::move(imageShape)), m_classes(classes), m_towers(towers),
      m_perTower(batchPerTower), m_examples(examples), m_seed(seed)
{
    const std::int64_t n = m_shape.numel();
    m_prototypes.resize(std::size_t(classes * n));
    Rng rng(seed * 7919 + 1);
    for (auto& v : m_prototypes) v = float(rng.normal());
}

std::int64_t SyntheticBatches::stepsPerEpoch() const
{
    return m_examples / (std::int64_t(m_towers) * m_perTower);
}

const std::vector<std::int64_t>& SyntheticBatches::permutation(std::int64_t epoch)
{
    if (epoch != m_permEpoch) {
        m_perm.resize(std::size_t(m_examples));
        std::iota(m_perm.begin(), m_perm.end(), std::int64_t(0));
        Rng rng(splitmix64(m_seed ^ splitmix64(std::uint64_t(epoch) + 17)));
        for (std::int64_t i = m_examples - 1; i > 0; --i)
            std::swap(m_perm[std::size_t(i)], m_perm[rng.below(std::uint64_t(i + 1))]);
        m_permEpoch = epoch;
    }
    return m_perm;
}

void SyntheticBatches::example(std::int64_t id, float* image, std::int32_t& label) const
{
    Rng rng(splitmix64(m_seed ^ splitmix64(std::uint64_t(id) * 31 + 5)));
    label = std::int32_t(rng.below(std::uint64_t(m_classes)));
    const std::int64_t n = m_shape.numel();
    const float* proto = m_prototypes.data() + label * n;
    for (std::int64_t i = 0; i < n; ++i) image[i] = proto[i] + 0.8f * float(rng.normal());
}

const Batch& SyntheticBatches::next()
{
    ++m_calls;
    const std::int64_t step = m_next++;
    const std::int64_t global = std::int64_t(m_towers) * m_perTower;
    const std::int64_t perEpoch = stepsPerEpoch();
    const std::int64_t epoch = step / perEpoch, within = step % perEpoch;
    const auto& perm = permutation(epoch);
    Tensor::ensure(m_batch.images, {global, m_shape[0], m_shape[1], m_shape[2]}, DType::Float32);
    Tensor::ensure(m_batch.labels, Shape{global}, DType::Int32);
    const std::int64_t n = m_shape.numel();
    for (std::int64_t k = 0; k < global; ++k) {
        std::int32_t label = 0;
        example(perm[std::size_t(within * global + k)], m_batch.images.data<float>() + k * n,
                label);
        m_batch.labels.data<std::int32_t>()[k] = label;
    }
    if (step == m_nanStep)
        m_batch.images.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
    m_batch.step = step;
    m_batch.epoch = epoch;
    m_batch.towers = m_towers;
    return m_batch;
}

EvalBatchFn SyntheticBatches::evaluationBatches() const
{
    return [this](std::int64_t begin, std::int64_t end, Tensor& images, Tensor& labels) {
        Tensor::ensure(images, {end - begin, m_shape[0], m_shape[1], m_shape[2]}, DType::Float32);
        Tensor::ensure(labels, Shape{end - begin}, DType::Int32);
        const std::int64_t n = m_shape.numel();
        for (std::int64_t i = begin; i < end; ++i)
            example(m_examples + i, images.data<float>() + (i - begin) * n,
                    labels.data<std::int32_t>()[i - begin]);
    };
}

engine::TrainConfig smallTrainConfig()
{
    engine::TrainConfig c;
    c.model = "fashion-fast";
    c.towers = 2;
    c.threadsPerTower = 1;
    c.batchPerTower = 4;
    c.steps = 6;
    c.optimizer.kind = "momentum";
    c.schedule.lr = 0.01;
    c.seed = 3;
    return c;
}

SyntheticBatches syntheticBatchesFor(const engine::TrainConfig& c, std::uint64_t seed)
{
    return SyntheticBatches({28, 28, 1}, 10, c.towers, c.batchPerTower, 400, seed);
}

} // namespace towers::test
