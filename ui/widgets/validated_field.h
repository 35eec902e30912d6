#pragma once
// A line edit for one number (or a short list of numbers) that refuses what it cannot parse and
// says at the field why a value is out of range: a QRegularExpressionValidator keeps the syntax
// right while typing, a check function gives the reason ("must be in (0, 1]") shown under the
// field, and the field is marked until the value is acceptable.
#include <QWidget>

#include <functional>

class QLabel;
class QLineEdit;

namespace towers::ui {

class ValidatedField : public QWidget
{
    Q_OBJECT
public:
    enum class Syntax
    {
        Integer,
        Decimal,
        IntegerList
    };
    // check(text) returns the reason the value is refused, or an empty string when it is fine.
    using Check = std::function<QString(const QString&)>;

    ValidatedField(Syntax syntax, Check check, QWidget* parent = nullptr);

    QString text() const;
    void setText(const QString& text);
    double value() const;           // Decimal and Integer
    qint64 integer() const;         // Integer
    QList<qint64> integers() const; // IntegerList: "30, 60, 90"

    // The reason the current value is refused; empty when acceptable.
    QString error() const { return m_error; }
    bool isValid() const { return m_error.isEmpty(); }
    // An error from outside (a rule that involves other fields); empty clears it.
    void setExternalError(const QString& reason);
    QLineEdit* lineEdit() const { return m_edit; }
    // What the field is, its tooltip; a refused value's reason goes before it.
    void setHint(const QString& hint);

    // The reason under a field, as this field shows its own: for another kind of field (a spin
    // box) refused by a rule of the form's. A new label, hidden; showMessage shows `reason` in it
    // ("⚠ reason"), or hides it for an empty one.
    static QLabel* newMessageLabel(QWidget* parent);
    static void showMessage(QLabel* label, const QString& reason);
    // A field's tooltip: what it is (`hint`), a refused value's reason before it ("⚠ reason").
    static QString tooltip(const QString& reason, const QString& hint);

    // Checks for the usual ranges.
    static Check positive();
    static Check atLeast(double min);
    static Check between(double lo, bool loOpen, double hi, bool hiOpen);
    static Check increasingPositive();

signals:
    void edited();

private:
    void revalidate();

    Syntax m_syntax;
    Check m_check;
    QLineEdit* m_edit;
    QLabel* m_message;
    QString m_error, m_ownError, m_externalError, m_hint;
};

} // namespace towers::ui
