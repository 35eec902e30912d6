#pragma once
// What the stand-in GPU towers' tests share (tst_device_towers, tst_device_towers_graphs,
// tst_device_towers_data): the stand-in's first GPU, the towers' options on it or on the host, a
// network without buffers, and the check that two sets of towers hold the same state.
#include <QtTest>

#include <memory>
#include <string>

#include "engine/models/model.h"
#include "engine/nn/conv2d.h"
#include "engine/nn/dropout.h"
#include "engine/nn/flatten.h"
#include "engine/nn/linear.h"
#include "engine/nn/pool2d.h"
#include "engine/nn/sequential.h"
#include "engine/train/tower_set.h"
#include "fake_device.h"
#include "replication.h"

namespace towers::test {

inline const engine::Device kGpu0{engine::DeviceKind::Cuda, 0};

// Checks that `got` holds what `want` holds, byte for byte: every parameter and buffer, the
// optimizer's state and step count, the moving averages.
inline void expectSameState(engine::TowerSet& want, engine::TowerSet& got)
{
    QCOMPARE(got.optimizer().stepCount(), want.optimizer().stepCount());
    const auto& wp = want.model().parameters();
    const auto& gp = got.model().parameters();
    QCOMPARE(gp.size(), wp.size());
    for (std::size_t i = 0; i < wp.size(); ++i)
        QVERIFY2(sameBytes(gp[i]->value, wp[i]->value), wp[i]->name.c_str());
    const auto ws = want.optimizer().state(wp), gs = got.optimizer().state(gp);
    QCOMPARE(gs.size(), ws.size());
    for (std::size_t i = 0; i < ws.size(); ++i)
        QVERIFY2(sameBytes(gs[i].second, ws[i].second), ws[i].first.c_str());
    QCOMPARE(got.ema() != nullptr, want.ema() != nullptr);
    if (!want.ema()) return;
    const auto we = want.ema()->state(), ge = got.ema()->state();
    for (std::size_t i = 0; i < we.size(); ++i)
        QVERIFY2(sameBytes(ge[i].second, we[i].second), we[i].first.c_str());
}

inline engine::TowerSetOptions options(int towers, bool onDevice, double ema = 0,
                                       bool deviceCollectives = false,
                                       const std::string& backend = "reference")
{
    engine::TowerSetOptions o;
    o.model = "fashion-fast"; // convolutions, batch norm, max-pool, dropout, linear layers
    o.backend = backend;
    o.towers = towers;
    o.optimizer.kind = "nesterov";
    o.seed = 3;
    o.emaDecay = ema;
    if (onDevice) o.makeOps = [backend](int t) { return makeFakeDeviceOps(backend, t % 2); };
    if (deviceCollectives) o.makeCommunicator = [](int n) { return makeStagingCommunicator(n); };
    return o;
}

// A small network without buffers (no batch norm), for fashion-fast's 28x28 grayscale batches:
// only the flag of the step before it can skip a step.
inline std::unique_ptr<engine::Sequential> withoutBuffersNet()
{
    engine::Conv2dOptions c;
    c.inChannels = 1;
    c.outChannels = 4;
    c.kernelH = c.kernelW = 3;
    c.padding = engine::Padding::Same;
    c.activation = engine::Activation::Relu;
    engine::LinearOptions l;
    l.inFeatures = 14 * 14 * 4;
    l.outFeatures = 10;
    auto net = std::make_unique<engine::Sequential>();
    net->add(std::make_unique<engine::Conv2d>("conv", c));
    net->add(std::make_unique<engine::MaxPool2d>("pool", 2, 2, engine::Padding::Valid));
    net->add(std::make_unique<engine::Flatten>("flatten"));
    net->add(std::make_unique<engine::Dropout>("drop", 0.25));
    net->add(std::make_unique<engine::Linear>("dense", l));
    return net;
}

inline std::unique_ptr<engine::Model> withoutBuffers()
{
    return std::make_unique<engine::Model>("without-buffers", engine::Shape{28, 28, 1}, 10,
                                           withoutBuffersNet());
}

} // namespace towers::test
