#pragma once
#include <memory>
#include <vector>

#include "engine/nn/layer.h"

namespace towers::engine {

class BatchNorm;

// Layers run one after the other. Keeps every intermediate activation and gradient between
// steps, so steady-state training allocates nothing.
class Sequential final : public Layer
{
public:
    explicit Sequential(std::string name = {}) : Layer(std::move(name)) {}

    template <class L> L& add(std::unique_ptr<L> layer)
    {
        L& ref = *layer;
        m_layers.push_back(std::move(layer));
        m_acts.emplace_back();
        m_grads.emplace_back();
        m_converted.emplace_back();
        return ref;
    }

    std::string kind() const override { return "sequential"; }
    std::string describe() const override;
    Shape outputShape(const Shape& input) const override;
    double forwardFlops(const Shape& input) const override;
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override;
    // Its y is in the type its last layer writes.
    bool takesBf16() const override { return true; }
    void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor* dx) override;
    void collectParameters(std::vector<Parameter*>& out) override;
    void initialize(Rng& rng) override;
    void visit(const std::function<void(Layer&)>& f) override;

    const std::vector<std::unique_ptr<Layer>>& layers() const { return m_layers; }
    // The output of layer i of the latest forward(), for every layer but the last (whose output
    // is the caller's y). Not computed for a convolution with a batch norm folded into it
    // (ExecContext::foldBatchNorms); for the layers an evaluation ran in chunks
    // (ExecContext::chunkCacheBytes), that of the last chunk, but the whole batch's for the last
    // of them.
    const Tensor& output(std::size_t i) const { return m_acts.at(i); }

    // How an evaluation pass runs a batch of `input`'s shape in a cache of `cacheBytes`: layers
    // [0, layers) a chunk of `images` at a time, the rest on the whole batch; layers 0 for the
    // whole batch throughout. The first layers qualify while a chunk of at least kMinChunk
    // images, each layer's input and output together, fits the cache and the layer's weights are
    // small beside the images it maps (a chunk reads them again, and folds a batch norm into them
    // or transforms them); a nested block (a residual, a concat) ends them, and a convolution and
    // the batch norm folded into it count as one layer. Of those, the chunked part ends where it
    // saves most: the outputs of the layers before the end stay in the cache, the end's own is
    // copied into the whole batch's (about three passes over it), and it must save something. A
    // batch of fewer than three chunks runs whole. Chunks are even.
    struct Chunking
    {
        std::size_t layers = 0;
        std::int64_t images = 0;
    };
    static constexpr std::int64_t kMinChunk = 8;
    Chunking chunking(const Shape& input, std::int64_t cacheBytes);

private:
    // Layers [begin, end) on x, the last writing y and the others their m_acts.
    void run(ExecContext& ctx, std::size_t begin, std::size_t end, const Tensor& x, Tensor& y);
    // forward() in chunks of the batch through layers [0, c.layers).
    void forwardInChunks(ExecContext& ctx, const Chunking& c, const Tensor& x, Tensor& y);
    // The batch norm after layer i when layer i is a convolution it folds into (one convolution
    // in evaluation, ExecContext::foldBatchNorms), else null.
    BatchNorm* foldsAfter(std::size_t i);

    std::vector<std::unique_ptr<Layer>> m_layers;
    std::vector<Tensor> m_acts;      // output of layer i (the last one is the caller's y)
    std::vector<Tensor> m_grads;     // dL/d(output of layer i)
    std::vector<Tensor> m_converted; // layer i's bfloat16 input in float32, when it takes no other
    Tensor m_chunkOut;               // a chunk's output of the chunked layers
    Shape m_chunkedFor;              // the input shape and cache of m_chunking
    std::int64_t m_chunkedCache = -1;
    Chunking m_chunking;
};

// y = x + body(x): a residual block whose body keeps the shape.
class Residual final : public Layer
{
public:
    Residual(std::string name, std::unique_ptr<Sequential> body);

    std::string kind() const override { return "residual"; }
    std::string describe() const override;
    Shape outputShape(const Shape& input) const override;
    double forwardFlops(const Shape& input) const override;
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override;
    // y is bfloat16 when x and the body's output are; float32 when either is.
    bool takesBf16() const override { return true; }
    void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor* dx) override;
    void collectParameters(std::vector<Parameter*>& out) override;
    void initialize(Rng& rng) override;
    void visit(const std::function<void(Layer&)>& f) override;

    Sequential& body() { return *m_body; }
    const Sequential& body() const { return *m_body; }

private:
    std::unique_ptr<Sequential> m_body;
    Tensor m_bodyOut, m_bodyDx;
    Tensor m_converted; // x or the body's output in float32, when the other is float32
};

// Branches side by side (an Inception module): each branch maps x to an image of x's height and
// width, and y is their outputs one after the other along the channels (torch.cat(dim=1) in
// PyTorch's NCHW). An empty branch passes x itself. Backward runs the branches last to first, so
// their parameters' gradients are final in the reverse of state_dict order, as a Sequential's.
class Concat final : public Layer
{
public:
    Concat(std::string name, std::vector<std::unique_ptr<Sequential>> branches);

    std::string kind() const override { return "concat"; }
    std::string describe() const override;
    Shape outputShape(const Shape& input) const override;
    double forwardFlops(const Shape& input) const override;
    void forward(ExecContext& ctx, const Tensor& x, Tensor& y) override;
    void backward(ExecContext& ctx, const Tensor& x, const Tensor& y, const Tensor& dy,
                  Tensor* dx) override;
    void collectParameters(std::vector<Parameter*>& out) override;
    void initialize(Rng& rng) override;
    void visit(const std::function<void(Layer&)>& f) override;

    const std::vector<std::unique_ptr<Sequential>>& branches() const { return m_branches; }

private:
    // Each branch's output shape for `input`, checked to share its N, H and W.
    std::vector<Shape> branchShapes(const Shape& input) const;
    // Branch i's output of the latest forward: x itself for an empty branch.
    const Tensor& part(std::size_t i, const Tensor& x) const;

    std::vector<std::unique_ptr<Sequential>> m_branches;
    std::vector<Tensor> m_outs;      // each branch's output (an empty branch's is x: none kept)
    std::vector<Tensor> m_dys;       // each branch's part of dy
    std::vector<Tensor> m_converted; // a branch's bfloat16 output in float32 (evaluation)
    Tensor m_dx;                     // a branch's dx before it is added to the others'
};

} // namespace towers::engine
