#pragma once
// The Model page's "Edit…" window: the chosen network as a model file's text (a built-in model's
// written out to start from, or the model file it was opened from), edited in place as NVIDIA
// DIGITS' custom networks were. Checked as the user types (engine::modelFromDefinition and its
// recipe, as train checks a file): the layer count and parameters, or the mistake naming the
// layer and the field. "Use this network" chooses the edited network (a run keeps its definition,
// so it needs no file); Save and Save as… write the text, whole or not at all, valid or not.
#include <QDialog>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "engine/models/registry.h"

class QLabel;
class QPlainTextEdit;
class QPushButton;
class QTimer;

namespace towers::ui {

class ModelFileEditor : public QDialog
{
    Q_OBJECT
public:
    // Edits `from`; `path`: the model file it was opened from ("" for none), whose text is shown
    // when it still describes `from`, and where Save writes.
    ModelFileEditor(const engine::ModelInfo& from, const QString& path, QWidget* parent = nullptr);

    ~ModelFileEditor() override;

    QPlainTextEdit* editor() const { return m_text; }
    QString text() const;
    // Puts `text` in the editor and checks it as typing does (checkInBackground), as the window
    // does with the text it opens with.
    void setText(const QString& text);
    // What typing does after a pause: the text read and the network built off the GUI thread, to
    // name a mistake or count its layers and parameters (a long text takes its time: the window
    // stays live, "Checking…", "Use" waiting for the answer). One check at a time; a
    // check whose text has changed since is dropped. It runs on a thread of its own that nothing
    // waits for: the window closed or the application quit, its answer is dropped.
    void checkInBackground();
    // Whether the text's check has not answered yet (a pause's check to come, or a build).
    bool isChecking() const;
    // Builds running for editors' checks in this process, the windows of some of them closed
    // already: the application exits without waiting for them (towers_main).
    static int buildsRunning();
    // What the check says: "my-net: 10 layers, 421,738 trainable parameters" or the mistake.
    QString status() const;
    // The line (from 1) of the mistake, marked in the editor: where the JSON breaks, or the field
    // or layer the mistake names (engine::mistakeLine); 0 for none.
    int mistakeLine() const { return m_mistakeLine; }
    // The network of the text as last checked (none while it has a mistake).
    const std::optional<engine::ModelInfo>& network() const { return m_network; }
    // The file Save writes ("" until saved as one), and whether the text differs from it.
    QString path() const { return m_path; }
    bool isModified() const;
    // Writes the text to `path` (replacing it: the caller has asked) and makes it the editor's
    // file; false with `error` saying why not.
    bool saveAs(const QString& path, QString* error);
    // The file this window's last Save or Save as… wrote ("" when none did): cancelled, the
    // window leaves the network unchosen but that file written.
    QString savedPath() const { return m_savedPath; }
    // Shows the text of the model file `path`, whatever network it holds (a file saved from an
    // earlier Edit… and not chosen), and makes it the editor's file; false with `error` saying
    // why not, the editor unchanged.
    bool openFile(const QString& path, QString* error);

private:
    struct Checked
    {
        QString status;
        int line = 0; // of the mistake
        std::optional<engine::ModelInfo> network;
    };
    // What reading and building the text told: the network, its layers and parameters, or the
    // mistake (or out of memory). Made without Qt: on a check's own thread.
    struct Examined
    {
        std::optional<engine::ModelInfo> network;
        std::size_t layers = 0;
        std::int64_t parameters = 0;
        std::string error;
    };
    // Reads the text into a network and builds it to count its layers and parameters.
    static Examined examine(const std::string& source, const std::string& where);
    // What the check says of it, with the mistake's line.
    static Checked checked(Examined examined, const std::string& source, const std::string& where);
    // What a check's thread shares with its editor: the editor while it lives (cleared, under
    // the lock, as it is destroyed), to which the thread posts its answer.
    struct Link
    {
        std::mutex mutex;
        ModelFileEditor* editor = nullptr;
    };
    std::shared_ptr<Link> m_link;
    void showChecked(Checked checked);
    std::string where() const;

    void save();
    void chooseSaveFile();
    void reject() override; // asks before unsaved edits are dropped

    QPlainTextEdit* m_text;
    QLabel* m_status;
    QPushButton* m_use;
    QTimer* m_checkTimer;
    void markLine(int line);

    QString m_path, m_savedText;
    QString m_savedPath; // savedPath()
    int m_mistakeLine = 0;
    quint64 m_generation = 0;         // of the latest check begun; an older one's answer is dropped
    bool m_building = false;          // a background check runs
    bool m_buildAgain = false;        // and the text changed meanwhile
    bool m_acceptWhenChecked = false; // "Use" clicked before the text's check answered
    std::optional<engine::ModelInfo> m_network;
};

} // namespace towers::ui
