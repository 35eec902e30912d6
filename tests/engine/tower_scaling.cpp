// Benchmark (not a test): images per second of synchronous replicated training on the CPU for
// several splits of the same global batch into towers, on one fixed synthetic batch (the input
// pipeline is not timed), after a warm-up.
//   tower_scaling [--model cifar10-tutorial] [--global-batch 128] [--steps 20] [--optimizer
//   momentum]
//                 [--configs 1x2,2x1,1x1]        towers x threads per tower
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "engine/models/registry.h"
#include "engine/train/tower_set.h"
#include "synthetic_batches.h"

using namespace towers::engine;

namespace {

const char* const kUsage =
    "usage: tower_scaling [--model NAME] [--global-batch N] [--steps N] [--optimizer NAME]\n"
    "                     [--configs TxP,...]\n"
    "Times TowerSet::step on one fixed synthetic batch for each split of the global batch into\n"
    "T towers of P threads (default: cifar10-tutorial, 128, 20 steps, momentum, 1x2,2x1,1x1).\n";

// A whole positive integer, else nothing.
bool positive(const std::string& text, int& out)
{
    char* end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v < 1 || v > 1'000'000) return false;
    out = int(v);
    return true;
}

} // namespace

int main(int argc, char** argv)
{
    std::string model = "cifar10-tutorial", optimizer = "momentum", configs = "1x2,2x1,1x1";
    int global = 128, steps = 20;
    for (int i = 1; i < argc; i += 2) {
        const std::string k = argv[i];
        if (k == "--help" || k == "-h") {
            std::fputs(kUsage, stdout);
            return 0;
        }
        const bool known = k == "--model" || k == "--global-batch" || k == "--steps" ||
                           k == "--optimizer" || k == "--configs";
        if (!known || i + 1 >= argc) {
            std::fprintf(stderr,
                         known ? "tower_scaling: %s needs a value\n%s"
                               : "tower_scaling: unknown option %s\n%s",
                         k.c_str(), kUsage);
            return 2;
        }
        const std::string v = argv[i + 1];
        if ((k == "--global-batch" && !positive(v, global)) ||
            (k == "--steps" && !positive(v, steps))) {
            std::fprintf(stderr, "tower_scaling: %s must be a positive integer, got '%s'\n",
                         k.c_str(), v.c_str());
            return 2;
        }
        if (k == "--model") model = v;
        if (k == "--optimizer") optimizer = v;
        if (k == "--configs") configs = v;
    }
    try {
        const ModelInfo& info = findModel(model);
        std::printf("%s, global batch %d, %s, %d timed steps after 3 warm-up steps\n",
                    model.c_str(), global, optimizer.c_str(), steps);
        std::printf("%-8s %10s %10s %10s %10s %10s  %s\n", "towers", "images/s", "step ms",
                    "compute", "average", "update", "per-tower compute ms");
        std::size_t pos = 0;
        while (pos < configs.size()) {
            const std::size_t comma = configs.find(',', pos);
            const std::string c =
                configs.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
            pos = comma == std::string::npos ? configs.size() : comma + 1;
            const int towers = std::stoi(c.substr(0, c.find('x'))),
                      threads = std::stoi(c.substr(c.find('x') + 1));
            TowerSetOptions o;
            o.model = model;
            o.towers = towers;
            o.threadsPerTower = threads;
            o.optimizer.kind = optimizer;
            TowerSet set(o);
            towers::test::SyntheticBatches source(info.inputShape, info.numClasses, towers,
                                                  global / towers, global, 1);
            const Batch& batch = source.next(); // the same batch every step
            double stepMs = 0, compute = 0, average = 0, update = 0;
            std::vector<double> perTower(std::size_t(towers), 0.0);
            for (int s = 0; s < steps + 3; ++s) {
                const auto t0 = std::chrono::steady_clock::now();
                const TowerStepResult r = set.step(batch, s, 0.01);
                const double ms =
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                        .count();
                if (s < 3) continue;
                std::size_t slowest = 0;
                for (std::size_t t = 0; t < r.towers.size(); ++t) {
                    perTower[t] += r.towers[t].computeMs / steps;
                    if (r.towers[t].computeMs > r.towers[slowest].computeMs) slowest = t;
                }
                stepMs += ms / steps;
                compute += r.towers[slowest].computeMs / steps;
                average += r.towers[slowest].commMs / steps;
                update += r.towers[slowest].updateMs / steps;
            }
            std::string towersText;
            for (double v : perTower) {
                char buf[32];
                std::snprintf(buf, sizeof buf, "%s%.1f", towersText.empty() ? "" : " ", v);
                towersText += buf;
            }
            std::printf("%-8s %10.0f %10.1f %10.1f %10.2f %10.2f  %s\n", c.c_str(),
                        global * 1000.0 / stepMs, stepMs, compute, average, update,
                        towersText.c_str());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tower_scaling: %s\n", e.what());
        return 1;
    }
    return 0;
}
