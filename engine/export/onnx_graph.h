#pragma once
// Internal to the ONNX exporter (engine/export/onnx_export.h): a model's layers as an ONNX graph.
#include <onnx/onnx_pb.h>

#include "engine/export/onnx_export.h"

namespace towers::engine::onnx_graph {

struct GraphStats
{
    int nodes = 0;
    int foldedBatchNorms = 0;
};

// Fills `graph` with `model` in inference form: the input "input" ([batch, H, W, C] or
// [batch, C, H, W]), the nodes, the weights as initializers, and the outputs "logits" and
// "probabilities". Each leaf layer's inference forward runs through a recording Ops whose calls
// become nodes; Sequential, Residual and Concat containers are walked here. Throws Unsupported
// naming the layer for anything ONNX cannot express.
GraphStats buildGraph(Model& model, OnnxLayout layout, ::onnx::GraphProto& graph);

} // namespace towers::engine::onnx_graph
