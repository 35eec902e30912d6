#pragma once
// Test support for Towers' Highway kernels on every SIMD target of the build (engine/cpu/
// simd_target.h): what a test says of a target this CPU cannot run, the data rows' test body on
// one target, and a loop over every target this CPU runs.
#include <QtTest>

#include "engine/cpu/simd_target.h"

namespace towers::test {

// Why a SIMD target's test does not run here.
inline QString notRunnableHere(const QString& target)
{
    return target + QStringLiteral(": this CPU cannot run it (or TOWERS_SIMD_TARGET excludes it)");
}

// Runs check(target name) with Towers' Highway kernels forced to each SIMD target this CPU runs
// (saying which it cannot); fails when there is none.
template <class Check> void onEverySimdTarget(const Check& check)
{
    int ran = 0;
    for (const auto& target : engine::cpu::simdTargets()) {
        if (!target.supported) {
            qInfo().noquote() << notRunnableHere(QString::fromStdString(target.name));
            continue;
        }
        const engine::cpu::ForcedSimdTarget forced(target.id);
        check(target.name);
        ++ran;
    }
    QVERIFY(ran > 0);
}

} // namespace towers::test

// In a test whose rows have the columns target (qint64: the target's id), targetName (QString)
// and supported (bool), one row per target: skips a target this CPU cannot run, saying so, and
// runs the rest of the test with every Highway kernel forced to the row's target.
#define TOWERS_RUN_ON_TARGET()                                                                     \
    QFETCH(qint64, target);                                                                        \
    QFETCH(QString, targetName);                                                                   \
    QFETCH(bool, supported);                                                                       \
    if (!supported) QSKIP(qPrintable(::towers::test::notRunnableHere(targetName)));                \
    const ::towers::engine::cpu::ForcedSimdTarget forced(target)
