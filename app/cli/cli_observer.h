#pragma once
// towers-cli train's observer of the trainer (train_command.cpp runs the training): what the
// trainer reports, printed as log lines or as one JSON object per event (--json).
#include <QJsonObject>
#include <QString>

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>
#include <vector>

#include "app/cli/command.h"
#include "app/cli/output_queue.h"
#include "engine/train/evaluation.h"
#include "engine/train/trainer_observer.h"

namespace towers::app {

// Prints what the trainer reports: the tutorial's log lines, or one JSON object per event.
class CliObserver final : public engine::TrainerObserver
{
public:
    CliObserver(CommandIo& io, bool json) : m_json(json), m_output(io.out) {}
    ~CliObserver() override { releaseLog(); }

    // Log lines of the session's construction (the weights a run starts from, a checkpoint it
    // resumes) are held until the run's header ("run folder", "dataset") is out, so that they
    // read after it; a failure releases them before its message.
    void holdLog();
    void releaseLog();

    // While training runs, lines go out through a thread of their own (output_queue.h): a stalled
    // output never stalls the trainer.
    void startBackgroundOutput() { m_output.start(); }
    void finishBackgroundOutput() { m_output.finish(); }

    void onStep(const engine::StepMetrics& m) override;
    void onEvaluation(const engine::EvalResult& r) override;
    void onLog(const std::string& line) override;
    void onCheckpoint(const std::filesystem::path& file, std::int64_t step) override;

    bool haveEval() const { return m_haveEval; }
    const engine::EvalResult& lastEval() const { return m_lastEval; }
    const QString& lastCheckpoint() const { return m_lastCheckpoint; }

    void print(const QJsonObject& o);

private:
    void printLocked(const QJsonObject& o);

    bool m_json;
    OutputQueue m_output;
    std::mutex m_mutex;
    bool m_holding = false;
    std::vector<QString> m_held;
    bool m_haveEval = false;
    engine::EvalResult m_lastEval;
    QString m_lastCheckpoint;
};

} // namespace towers::app
