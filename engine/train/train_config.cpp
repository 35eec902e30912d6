#include "engine/train/train_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>

#include <sys/resource.h>

#include <nlohmann/json.hpp>

#include "engine/backends.h"
#include "engine/cpu/cores.h"
#include "engine/data/dataset_content.h"
#include "engine/data/validation_split.h"
#include "engine/errors.h"
#include "engine/gpu/gpu_backend.h"
#include "engine/io/json_depth.h"
#include "engine/models/registry.h"

namespace towers::engine {

namespace {

using Json = nlohmann::json;

// The shortest text that reads back as exactly `v` ("1e+06", "0.1").
std::string shortestNumber(double v)
{
    char text[32];
    const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
    return ec == std::errc() ? std::string(text, end) : std::to_string(v);
}

[[noreturn]] void fail(const std::string& field, const std::string& what)
{
    throw InvalidArgument("training configuration: " + field + ": " + what);
}

// Reads obj[key] into `out` when present; a wrong type names the field.
template <class T>
void read(const Json& obj, const char* key, T& out, const std::string& prefix = {})
{
    const auto it = obj.find(key);
    if (it == obj.end()) return;
    try {
        if constexpr (std::is_same_v<T, bool>) {
            if (!it->is_boolean()) throw std::runtime_error("expected true or false");
        } else if constexpr (std::is_integral_v<T>) {
            if (!it->is_number_integer()) throw std::runtime_error("expected an integer");
            if constexpr (std::is_unsigned_v<T>)
                if (it->is_number_integer() && !it->is_number_unsigned())
                    throw std::runtime_error("expected an integer >= 0");
        } else if constexpr (std::is_floating_point_v<T>) {
            if (!it->is_number()) throw std::runtime_error("expected a number");
        } else if constexpr (std::is_same_v<T, std::string>) {
            if (!it->is_string()) throw std::runtime_error("expected a string");
        }
        out = it->get<T>();
    } catch (const std::exception& e) {
        fail(prefix + key, std::string(e.what()) + ", got " + it->dump());
    }
}

void rejectUnknown(const Json& obj, const std::set<std::string>& known, const std::string& prefix)
{
    for (const auto& [key, value] : obj.items())
        if (!known.count(key)) fail(prefix + key, "unknown field");
}

} // namespace

void TrainConfig::validate() const
{
    try {
        resolveModel(model, modelDefinition);
    } catch (const InvalidArgument& e) {
        fail("model", e.what());
    }
    if (classes != 0 && (classes < 2 || classes > kMaxClasses))
        fail("classes", "must be from 2 to " + std::to_string(kMaxClasses) +
                            " (0: the model's default), got " + std::to_string(classes));
    if (!isBackendName(backend))
        fail("backend", "must be " + backendNamesText(" or ") + ", got '" + backend + "'");
    if (!gpus.empty() && isHostBackend(backend))
        fail("gpus", "only for the cuda backend, not " + backend);
    if (allreduce != "auto" && allreduce != "host")
        fail("allreduce", "must be auto or host, got '" + allreduce + "'");
    if (sampling != "uniform" && sampling != "balanced")
        fail("sampling", "must be uniform or balanced, got '" + sampling + "'");
    if (gpuData != "auto" && gpuData != "off")
        fail("gpuData", "must be auto or off, got '" + gpuData + "'");
    if (!(bucketMb >= 0 && bucketMb <= kMaxBucketMb))
        fail("bucketMb", "must be from 0 (one collective after backward) to " +
                             std::to_string(int(kMaxBucketMb)) + " MiB, got " +
                             std::to_string(bucketMb));
    if (!gpus.empty() && int(gpus.size()) != towers)
        fail("gpus", "names " + std::to_string(gpus.size()) + " GPUs for " +
                         std::to_string(towers) + " towers");
    for (int g : gpus)
        if (g < 0) fail("gpus", "GPU numbers are >= 0, got " + std::to_string(g));
    if (processes < 1 || processes > kMaxProcesses)
        fail("processes", "must be in [1, " + std::to_string(kMaxProcesses) + "], got " +
                              std::to_string(processes));
    if (towers < 1 || towers > kMaxTowers)
        fail("towers",
             "must be in [1, " + std::to_string(kMaxTowers) + "], got " + std::to_string(towers));
    if (threadsPerTower < 0 || threadsPerTower > kMaxThreadsPerTower)
        fail("threadsPerTower", "must be in [0, " + std::to_string(kMaxThreadsPerTower) +
                                    "] (0 = share the cores), got " +
                                    std::to_string(threadsPerTower));
    if (batchPerTower < 1)
        fail("batchPerTower", "must be at least 1, got " + std::to_string(batchPerTower));
    if (accumulate < 1 || accumulate > kMaxAccumulate)
        fail("accumulate", "must be in [1, " + std::to_string(kMaxAccumulate) +
                               "] (1 = no accumulation), got " + std::to_string(accumulate));
    if (batchPerTower >= 1 && accumulate >= 1 &&
        examplesPerTowerStep() > std::numeric_limits<int>::max())
        fail("accumulate", "batchPerTower x accumulate must be at most " +
                               std::to_string(std::numeric_limits<int>::max()) + ", got " +
                               std::to_string(examplesPerTowerStep()));
    if (steps < 0 || steps > kMaxSteps)
        fail("steps", "must be a number from 0 to " + std::to_string(kMaxSteps) + ", got " +
                          std::to_string(steps));
    if (!(epochs >= 0 && epochs <= kMaxEpochs))
        fail("epochs", "must be a number from 0 to " + shortestNumber(kMaxEpochs) + ", got " +
                           shortestNumber(epochs));
    if (steps == 0 && epochs <= 0)
        fail("steps", "give the length of the run: steps > 0 or epochs > 0");
    try {
        makeOptimizer(optimizer);
    } catch (const InvalidArgument& e) {
        fail("optimizer", e.what());
    }
    try {
        schedule.validate();
    } catch (const InvalidArgument& e) {
        throw InvalidArgument(std::string("training configuration: ") + e.what());
    }
    if (!std::isfinite(weightDecay))
        fail("weightDecay", "must be a finite number (negative = the model's own)");
    if (!(emaDecay >= 0 && emaDecay < 1))
        fail("emaDecay", "must be in [0, 1) (0 = off), got " + std::to_string(emaDecay));
    if (!(labelSmoothing >= 0 && labelSmoothing < 1))
        fail("labelSmoothing",
             "must be in [0, 1) (0 = none), got " + std::to_string(labelSmoothing));
    if (!(clipGradNorm >= 0) || !std::isfinite(clipGradNorm))
        fail("clipGradNorm",
             "must be a finite number >= 0 (0 = no clipping), got " + std::to_string(clipGradNorm));
    if (checkpointEvery < 0) fail("checkpointEvery", "must be >= 0 (0 = at the end only)");
    if (keepCheckpoints < 1)
        fail("keepCheckpoints", "must be at least 1, got " + std::to_string(keepCheckpoints));
    if (evalEvery < 0) fail("evalEvery", "must be >= 0 (0 = at the end only)");
    if (!(validation >= 0 && validation <= kMaxValidationShare))
        fail("validation", "must be a share in [0, 0.5] of the training images (0 = none), got " +
                               std::to_string(validation));
    if (patience < 0) fail("patience", "must be >= 0 (0 = never stop early)");
    if (!(minDelta >= 0 && minDelta <= kMaxMinDelta))
        fail("minDelta", "must be a share of precision @ 1 in [0, 0.5] (0.002 = 0.2 points), got " +
                             std::to_string(minDelta));
    if (patience > 0 && evalEvery == 0)
        fail("patience", "counts evaluations, and evalEvery is 0 (only one, at the end): give "
                         "evalEvery too");
    if (evalBatchSize < 0) fail("evalBatchSize", "must be >= 0 (0 = batchPerTower)");
    if (logEvery < 1) fail("logEvery", "must be at least 1, got " + std::to_string(logEvery));
    if (histogramEvery < 0)
        fail("histogramEvery",
             "must be >= 0 (0 = no histograms), got " + std::to_string(histogramEvery));
    if (verifyEvery < 0) fail("verifyEvery", "must be >= 0 (0 = never)");
}

int TrainConfig::maxComputeThreads()
{
    long limit = 4096;
    if (std::ifstream in("/proc/sys/kernel/threads-max"); in) {
        long max = 0;
        if (in >> max && max > 0) limit = std::min(limit, max / 2);
    }
    rlimit r{};
    if (::getrlimit(RLIMIT_NPROC, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
        limit = std::min(limit, long(r.rlim_cur / 2));
    return int(std::max(1L, limit));
}

void TrainConfig::checkThreadBudget() const
{
    if (!isHostBackend(backend)) return; // a GPU tower is one host thread
    const long total = long(towers) * long(resolvedThreadsPerTower());
    const int limit = maxComputeThreads();
    if (total > limit)
        throw InvalidArgument(
            std::to_string(towers) + " towers x " + std::to_string(resolvedThreadsPerTower()) +
            " threads per tower = " + std::to_string(total) +
            " compute threads: more than this machine can start (at most " + std::to_string(limit) +
            " here; it may use " + std::to_string(cpu::usableCores()) +
            " cores). Ask for fewer towers or threads per tower (0 threads per tower shares the "
            "cores out)");
}

std::string TrainConfig::precisionUnavailable(const std::string& backend, Precision precision)
{
    if (precision == Precision::Float32) return {};
    if (backend == "cuda") {
        // From what the GPUs are, without making a context on one: "" when one of them runs
        // bfloat16, else why GPU 0 does not.
        std::string why;
        GpuBackend* gpu = cudaBackend(&why);
        if (!gpu) return "--precision bf16 on GPUs: " + why;
        if (gpu->deviceCount() == 0) return "--precision bf16 on GPUs: " + gpu->unavailableReason();
        std::string first;
        for (int g = 0; g < gpu->deviceCount(); ++g) {
            const GpuDeviceInfo info = gpu->deviceInfo(g);
            const std::string no =
                bf16UnavailableOn("GPU " + std::to_string(g) + ", " + info.name + ",",
                                  info.computeMajor, info.computeMinor);
            if (no.empty()) return {};
            if (g == 0) first = no;
        }
        return first;
    }
    try {
        makeBackendOps(backend, BackendOptions{0, false, precision}); // refuses with the reason
    } catch (const Unsupported& e) {
        return e.what();
    }
    return {};
}

void TrainConfig::checkPrecision() const
{
    if (const std::string why = precisionUnavailable(backend, precision); !why.empty())
        throw Unsupported(why);
}

std::int64_t TrainConfig::totalSteps(std::int64_t stepsPerEpoch) const
{
    if (steps > 0) return steps;
    if (stepsPerEpoch < 1) throw InvalidArgument("the data source has no complete batch per epoch");
    const double total = std::ceil(epochs * double(stepsPerEpoch) - 1e-9);
    // A double at or beyond 2^63 has no int64 (the cast would be undefined: a run of 1 step).
    if (!(total < 9.2e18))
        throw InvalidArgument(shortestNumber(epochs) + " epochs of " +
                              std::to_string(stepsPerEpoch) +
                              " steps: more steps than a run can count");
    return std::max<std::int64_t>(1, std::int64_t(total));
}

int TrainConfig::resolvedThreadsPerTower(int processesSharingCores) const
{
    if (threadsPerTower > 0) return threadsPerTower;
    return std::max(1, cpu::usableCores() /
                           (std::max(1, towers) * std::max(1, processesSharingCores)));
}

std::string TrainConfig::toJson() const
{
    Json o;
    o["model"] = model;
    if (!modelDefinition.empty()) o["modelDefinition"] = Json::parse(modelDefinition);
    o["classes"] = classes;
    o["backend"] = backend;
    o["towers"] = towers;
    o["processes"] = processes;
    o["gpus"] = gpus;
    o["allowTf32"] = allowTf32;
    o["cudnnBenchmark"] = cudnnBenchmark;
    o["precision"] = std::string(precisionName(precision));
    o["allreduce"] = allreduce;
    o["gpuData"] = gpuData;
    o["cudaGraphs"] = cudaGraphs;
    o["bucketMb"] = bucketMb;
    o["threadsPerTower"] = threadsPerTower;
    o["batchPerTower"] = batchPerTower;
    o["accumulate"] = accumulate;
    o["steps"] = steps;
    o["epochs"] = epochs;
    o["optimizer"] = {{"kind", optimizer.kind},           {"momentum", optimizer.momentum},
                      {"dampening", optimizer.dampening}, {"beta1", optimizer.beta1},
                      {"beta2", optimizer.beta2},         {"epsilon", optimizer.epsilon}};
    o["lr"] = schedule.lr;
    o["schedule"] = {{"kind", LrSchedule::kindName(schedule.kind)},
                     {"decayRate", schedule.decayRate},
                     {"decayEpochs", schedule.decayEpochs},
                     {"staircase", schedule.staircase},
                     {"gamma", schedule.gamma},
                     {"milestones", schedule.milestones},
                     {"warmupEpochs", schedule.warmupEpochs},
                     {"minLr", schedule.minLr},
                     {"warmupFraction", schedule.warmupFraction},
                     {"anneal", schedule.cosineAnneal ? "cos" : "linear"},
                     {"divFactor", schedule.divFactor},
                     {"finalDivFactor", schedule.finalDivFactor}};
    o["weightDecay"] = weightDecay;
    o["emaDecay"] = emaDecay;
    o["labelSmoothing"] = labelSmoothing;
    o["clipGradNorm"] = clipGradNorm;
    o["dropout"] = dropout;
    o["seed"] = seed;
    o["checkpointEvery"] = checkpointEvery;
    o["keepCheckpoints"] = keepCheckpoints;
    o["evalEvery"] = evalEvery;
    o["evalBatchSize"] = evalBatchSize;
    o["validation"] = validation;
    o["patience"] = patience;
    o["minDelta"] = minDelta;
    o["logEvery"] = logEvery;
    o["histogramEvery"] = histogramEvery;
    o["verifyEvery"] = verifyEvery;
    o["dataset"] = dataset;
    o["dataDir"] = dataDir;
    if (!datasetContent.empty()) o["datasetContent"] = Json::parse(datasetContent);
    o["initFrom"] = initFrom;
    o["augmentation"] = augmentation;
    o["sampling"] = sampling;
    o["runId"] = runId;
    return o.dump(2);
}

TrainConfig TrainConfig::fromJson(const std::string& text)
{
    Json o;
    try {
        requireJsonDepth(text);
        o = Json::parse(text);
    } catch (const Json::exception& e) {
        throw InvalidArgument(std::string("training configuration: not valid JSON: ") + e.what());
    }
    if (!o.is_object()) throw InvalidArgument("training configuration: expected a JSON object");
    rejectUnknown(o, {"model",          "backend",         "towers",          "processes",
                      "gpus",           "allowTf32",       "precision",       "allreduce",
                      "gpuData",        "bucketMb",        "threadsPerTower", "batchPerTower",
                      "steps",          "epochs",          "optimizer",       "lr",
                      "schedule",       "weightDecay",     "emaDecay",        "dropout",
                      "seed",           "checkpointEvery", "keepCheckpoints", "evalEvery",
                      "evalBatchSize",  "logEvery",        "histogramEvery",  "verifyEvery",
                      "dataset",        "dataDir",         "augmentation",    "runId",
                      "cudaGraphs",     "cudnnBenchmark",  "classes",         "initFrom",
                      "validation",     "patience",        "minDelta",        "modelDefinition",
                      "datasetContent", "labelSmoothing",  "clipGradNorm",    "accumulate",
                      "sampling"},
                  "");
    TrainConfig c;
    read(o, "model", c.model);
    if (const auto it = o.find("modelDefinition"); it != o.end()) {
        if (!it->is_object())
            fail("modelDefinition", "expected a model file's object, got " + it->dump());
        c.modelDefinition = it->dump();
    }
    read(o, "classes", c.classes);
    read(o, "backend", c.backend);
    read(o, "towers", c.towers);
    read(o, "processes", c.processes);
    if (const auto it = o.find("gpus"); it != o.end()) {
        if (!it->is_array()) fail("gpus", "expected an array of GPU numbers, got " + it->dump());
        for (const auto& g : *it) {
            if (!g.is_number_integer()) fail("gpus", "expected GPU numbers, got " + g.dump());
            c.gpus.push_back(g.get<int>());
        }
    }
    read(o, "allowTf32", c.allowTf32);
    read(o, "cudnnBenchmark", c.cudnnBenchmark);
    if (o.contains("precision")) {
        std::string name;
        read(o, "precision", name);
        try {
            c.precision = parsePrecision(name);
        } catch (const InvalidArgument& e) {
            fail("precision", e.what());
        }
    }
    read(o, "allreduce", c.allreduce);
    read(o, "gpuData", c.gpuData);
    read(o, "cudaGraphs", c.cudaGraphs);
    read(o, "bucketMb", c.bucketMb);
    read(o, "threadsPerTower", c.threadsPerTower);
    read(o, "batchPerTower", c.batchPerTower);
    read(o, "accumulate", c.accumulate);
    read(o, "steps", c.steps);
    read(o, "epochs", c.epochs);
    if (const auto it = o.find("optimizer"); it != o.end()) {
        if (it->is_string()) {
            c.optimizer.kind = it->get<std::string>();
        } else if (it->is_object()) {
            rejectUnknown(*it, {"kind", "momentum", "dampening", "beta1", "beta2", "epsilon"},
                          "optimizer.");
            read(*it, "kind", c.optimizer.kind, "optimizer.");
            read(*it, "momentum", c.optimizer.momentum, "optimizer.");
            read(*it, "dampening", c.optimizer.dampening, "optimizer.");
            read(*it, "beta1", c.optimizer.beta1, "optimizer.");
            read(*it, "beta2", c.optimizer.beta2, "optimizer.");
            read(*it, "epsilon", c.optimizer.epsilon, "optimizer.");
        } else {
            fail("optimizer", "expected a name or an object, got " + it->dump());
        }
    }
    read(o, "lr", c.schedule.lr);
    if (const auto it = o.find("schedule"); it != o.end()) {
        auto kind = [&](const std::string& name) {
            try {
                c.schedule.kind = LrSchedule::kindFromName(name);
            } catch (const UnknownName& e) {
                fail("schedule.kind", e.what());
            }
        };
        if (it->is_string()) {
            kind(it->get<std::string>());
        } else if (it->is_object()) {
            rejectUnknown(*it,
                          {"kind", "decayRate", "decayEpochs", "staircase", "gamma", "milestones",
                           "warmupEpochs", "minLr", "warmupFraction", "anneal", "divFactor",
                           "finalDivFactor"},
                          "schedule.");
            std::string k = LrSchedule::kindName(c.schedule.kind),
                        anneal = c.schedule.cosineAnneal ? "cos" : "linear";
            read(*it, "kind", k, "schedule.");
            kind(k);
            read(*it, "decayRate", c.schedule.decayRate, "schedule.");
            read(*it, "decayEpochs", c.schedule.decayEpochs, "schedule.");
            read(*it, "staircase", c.schedule.staircase, "schedule.");
            read(*it, "gamma", c.schedule.gamma, "schedule.");
            if (const auto m = it->find("milestones"); m != it->end()) {
                if (!m->is_array()) fail("schedule.milestones", "expected a list of epochs");
                c.schedule.milestones.clear();
                for (const auto& e : *m) {
                    if (!e.is_number_integer())
                        fail("schedule.milestones", "expected integer epochs, got " + e.dump());
                    c.schedule.milestones.push_back(e.get<std::int64_t>());
                }
            }
            read(*it, "warmupEpochs", c.schedule.warmupEpochs, "schedule.");
            read(*it, "minLr", c.schedule.minLr, "schedule.");
            read(*it, "warmupFraction", c.schedule.warmupFraction, "schedule.");
            read(*it, "anneal", anneal, "schedule.");
            if (anneal != "cos" && anneal != "linear")
                fail("schedule.anneal", "must be cos or linear, got '" + anneal + "'");
            c.schedule.cosineAnneal = anneal == "cos";
            read(*it, "divFactor", c.schedule.divFactor, "schedule.");
            read(*it, "finalDivFactor", c.schedule.finalDivFactor, "schedule.");
        } else {
            fail("schedule", "expected a name or an object, got " + it->dump());
        }
    }
    read(o, "weightDecay", c.weightDecay);
    read(o, "emaDecay", c.emaDecay);
    read(o, "labelSmoothing", c.labelSmoothing);
    read(o, "clipGradNorm", c.clipGradNorm);
    read(o, "dropout", c.dropout);
    read(o, "seed", c.seed);
    read(o, "checkpointEvery", c.checkpointEvery);
    read(o, "keepCheckpoints", c.keepCheckpoints);
    read(o, "evalEvery", c.evalEvery);
    read(o, "evalBatchSize", c.evalBatchSize);
    read(o, "validation", c.validation);
    read(o, "patience", c.patience);
    read(o, "minDelta", c.minDelta);
    read(o, "logEvery", c.logEvery);
    read(o, "histogramEvery", c.histogramEvery);
    read(o, "verifyEvery", c.verifyEvery);
    read(o, "dataset", c.dataset);
    read(o, "dataDir", c.dataDir);
    if (const auto it = o.find("datasetContent"); it != o.end()) {
        if (!it->is_object() || !datasetContentClasses(it->dump()))
            fail("datasetContent",
                 "expected the record of a dataset's content, got " + it->dump().substr(0, 200));
        c.datasetContent = it->dump();
    }
    read(o, "initFrom", c.initFrom);
    read(o, "augmentation", c.augmentation);
    read(o, "sampling", c.sampling);
    read(o, "runId", c.runId);
    c.validate();
    return c;
}

} // namespace towers::engine
