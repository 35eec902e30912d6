#include "ui/widgets/validated_field.h"

#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QRegularExpressionValidator>
#include <QVBoxLayout>

#include <cmath>
#include <limits>

namespace towers::ui {

namespace {

QRegularExpression syntaxPattern(ValidatedField::Syntax syntax)
{
    switch (syntax) {
    case ValidatedField::Syntax::Integer:
        return QRegularExpression(QStringLiteral("[0-9]{0,19}"));
    case ValidatedField::Syntax::Decimal:
        // 0.1, .5, 1e-4, 2.5E+3 (C locale: what the JSON config and the CLI use); commas are
        // typed, then taken as the point or refused (DecimalValidator).
        return QRegularExpression(QStringLiteral("[0-9,]*\\.?[0-9,]*([eE][-+]?[0-9]{0,3})?"));
    case ValidatedField::Syntax::IntegerList:
        return QRegularExpression(QStringLiteral("[0-9 ,]*"));
    }
    return {};
}

// A comma was refused alone and the digits after it kept: "0,05" became 005, a rate of 5. Where
// the locale's decimal sign is the comma (a German or French keypad types one) it is the point;
// elsewhere it stays, and the field refuses it with the reason ("1,000" is no thousand here).
class DecimalValidator : public QRegularExpressionValidator
{
public:
    using QRegularExpressionValidator::QRegularExpressionValidator;
    State validate(QString& input, int& pos) const override
    {
        if (QLocale().decimalPoint() == QStringLiteral(","))
            input.replace(QLatin1Char(','), QLatin1Char('.'));
        return QRegularExpressionValidator::validate(input, pos);
    }
};

QString number(double v)
{
    return QString::number(v, 'g', 6);
}

} // namespace

ValidatedField::ValidatedField(Syntax syntax, Check check, QWidget* parent)
    : QWidget(parent), m_syntax(syntax), m_check(std::move(check)), m_edit(new QLineEdit(this)),
      m_message(newMessageLabel(this))
{
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->setSpacing(1);
    layout->addWidget(m_edit);
    layout->addWidget(m_message);
    if (syntax == Syntax::Decimal)
        m_edit->setValidator(new DecimalValidator(syntaxPattern(syntax), m_edit));
    else
        m_edit->setValidator(new QRegularExpressionValidator(syntaxPattern(syntax), m_edit));
    setFocusProxy(m_edit);
    connect(m_edit, &QLineEdit::textEdited, this, [this] {
        revalidate();
        emit edited();
    });
    revalidate(); // empty: refused until a value is given
}

QString ValidatedField::text() const
{
    return m_edit->text().trimmed();
}

void ValidatedField::setText(const QString& text)
{
    m_edit->setText(text);
    revalidate();
}

double ValidatedField::value() const
{
    return text().toDouble();
}

qint64 ValidatedField::integer() const
{
    return text().toLongLong();
}

QList<qint64> ValidatedField::integers() const
{
    QList<qint64> out;
    for (const QString& part : text().split(QLatin1Char(','), Qt::SkipEmptyParts))
        out << part.trimmed().toLongLong();
    return out;
}

void ValidatedField::setHint(const QString& hint)
{
    m_hint = hint;
    revalidate();
}

void ValidatedField::setExternalError(const QString& reason)
{
    if (m_externalError == reason) return;
    m_externalError = reason;
    revalidate();
}

void ValidatedField::revalidate()
{
    const QString t = text();
    m_ownError.clear();
    bool parsed = true;
    if (m_syntax == Syntax::IntegerList) {
        for (const QString& part : t.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
            bool ok = false;
            part.trimmed().toLongLong(&ok);
            parsed = parsed && ok;
        }
    } else if (m_syntax == Syntax::Integer && !t.isEmpty()) {
        // Read as the integer it is: toDouble() would take 20 digits that integer() reads as 0.
        bool ok = false;
        t.toLongLong(&ok);
        // The field's own range where it has one (steps: at most 10^12), else int64's.
        if (!ok && m_check) m_ownError = m_check(t);
        if (!ok && m_ownError.isEmpty())
            m_ownError =
                tr("at most %1").arg(QLocale().toString(std::numeric_limits<qint64>::max()));
    } else {
        bool ok = false;
        const double v = t.toDouble(&ok);
        parsed = ok && std::isfinite(v);
        if (t.isEmpty()) m_ownError = tr("a value is needed");
        if (t.contains(QLatin1Char(',')))
            m_ownError = tr("a comma is no decimal point here: write 0.05, or 1000 without "
                            "a separator");
    }
    if (m_ownError.isEmpty() && !parsed) m_ownError = tr("not a number");
    if (m_ownError.isEmpty() && m_check) m_ownError = m_check(t);
    m_error = m_ownError.isEmpty() ? m_externalError : m_ownError;
    showMessage(m_message, m_error);
    m_edit->setToolTip(tooltip(m_error, m_hint));
}

QString ValidatedField::tooltip(const QString& reason, const QString& hint)
{
    if (reason.isEmpty()) return hint;
    return hint.isEmpty() ? QStringLiteral("⚠ ") + reason
                          : QStringLiteral("⚠ %1\n%2").arg(reason, hint);
}

QLabel* ValidatedField::newMessageLabel(QWidget* parent)
{
    auto* label = new QLabel(parent);
    label->setWordWrap(true);
    label->setTextFormat(Qt::PlainText);
    QFont f = label->font();
    f.setPointSizeF(f.pointSizeF() * 0.9);
    f.setBold(true);
    label->setFont(f);
    label->hide();
    return label;
}

void ValidatedField::showMessage(QLabel* label, const QString& reason)
{
    label->setText(reason.isEmpty() ? QString() : QStringLiteral("⚠ ") + reason);
    label->setVisible(!reason.isEmpty());
}

ValidatedField::Check ValidatedField::positive()
{
    return [](const QString& t) {
        return t.toDouble() > 0 ? QString() : tr("must be greater than 0");
    };
}

ValidatedField::Check ValidatedField::atLeast(double min)
{
    return [min](const QString& t) {
        return t.toDouble() >= min ? QString() : tr("must be at least %1").arg(number(min));
    };
}

ValidatedField::Check ValidatedField::between(double lo, bool loOpen, double hi, bool hiOpen)
{
    return [=](const QString& t) {
        const double v = t.toDouble();
        const bool ok = (loOpen ? v > lo : v >= lo) && (hiOpen ? v < hi : v <= hi);
        return ok ? QString()
                  : tr("must be in %1%2, %3%4")
                        .arg(loOpen ? QStringLiteral("(") : QStringLiteral("["), number(lo),
                             number(hi), hiOpen ? QStringLiteral(")") : QStringLiteral("]"));
    };
}

ValidatedField::Check ValidatedField::increasingPositive()
{
    return [](const QString& t) {
        qint64 previous = 0;
        for (const QString& part : t.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
            const qint64 v = part.trimmed().toLongLong();
            if (v <= 0) return tr("epochs must be positive");
            if (v <= previous) return tr("epochs must increase");
            previous = v;
        }
        return QString();
    };
}

} // namespace towers::ui
