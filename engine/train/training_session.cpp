#include "engine/train/training_session.h"

#include "engine/train/recipe.h"

namespace towers::engine {

TrainingSession::TrainingSession(SessionOptions options, TrainerObserver* observer)
    : m_options(std::move(options))
{
    TrainConfig& c = m_options.config;
    c.validate();
    if (c.dataset.empty()) throw InvalidArgument("no dataset given");
    if (c.augmentation.empty()) c.augmentation = "default";
    if (c.augmentation != "default" && c.augmentation != "none")
        throw InvalidArgument("augmentation must be 'default' or 'none', got '" + c.augmentation + "'");
    if (m_options.loaderWorkers < 0) throw InvalidArgument("loader workers must be >= 0");

    if (m_options.dataset) {
        if (m_options.dataset->name != c.dataset)
            throw InvalidArgument("the dataset given in memory is " + m_options.dataset->name + ", the configuration names " +
                                  c.dataset);
        m_dataset = m_options.dataset;
    } else {
        m_dataset = std::make_shared<const Dataset>(loadDatasetPreferring(c.dataset, c.dataDir, m_options.searchPath));
    }
    m_recipe = preprocessingFor(c.model, *m_dataset);

    LoaderOptions lo;
    lo.towers = c.towers;
    lo.batchPerTower = c.batchPerTower;
    lo.seed = c.seed;
    lo.augment = c.augmentation != "none";
    lo.workers = m_options.loaderWorkers;
    lo.pinned = c.backend == "cuda";
    m_loader = std::make_unique<BatchLoader>(m_dataset->train, m_recipe, lo);

    DataDescription data{m_dataset->classNames, m_recipe.toJson()};
    m_trainer = std::make_unique<Trainer>(c, *m_loader, m_options.runDirectory, data, observer);
    const ImageSet& test = m_dataset->test;
    const Preprocessing recipe = m_recipe;
    m_trainer->setEvaluator(test.count, [&test, recipe](std::int64_t begin, std::int64_t end, Tensor& images,
                                                        Tensor& labels) {
        evaluationBatch(test, recipe, begin, end, images, labels);
    });
    if (m_options.resume) {
        if (auto step = m_trainer->resumeFromNewest()) m_startStep = *step;
        else if (observer) observer->onLog("no checkpoint in " + m_options.runDirectory.string() + ": starting from step 0");
    }
}

TrainingSession::~TrainingSession() = default;

Trainer::Outcome TrainingSession::run(std::stop_token stop) { return m_trainer->run(std::move(stop)); }

} // namespace towers::engine
