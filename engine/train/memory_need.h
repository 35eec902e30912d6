#pragma once
// What a run's CPU towers take of the host's memory at least, worked out from its network and
// settings before it takes any. Each tower holds a replica of the weights with their gradients,
// its own optimizer state (every tower applies the update) and its layers' outputs for a batch;
// the moving average is one more copy of the weights; a checkpoint is written from the towers'
// tensors and read back one tensor at a time (verifyCheckpoint): its largest tensor more while it
// is written. The outputs' gradients, convolution workspaces and oneDNN's own layouts come on top
// (a batch took about twice its layer outputs in all for fashion-fast, about 7 times for
// mnist-convnet): this is a floor, measured against peak resident memory in tst_memory_need. GPU
// towers: the same parts on each GPU, against what CUDA says is free there (checkGpuMemory).
#include <cstdint>
#include <functional>
#include <string>

namespace towers::engine {

class Model;
class ProcessGroup;
struct TrainConfig;

struct MemoryNeed
{
    int towers = 0;
    std::int64_t batchPerTower = 0;
    std::int64_t replicas = 0;  // every tower's weights and gradients
    std::int64_t optimizer = 0; // every tower's optimizer state
    std::int64_t average = 0;   // the moving average of the weights (--ema-decay)
    std::int64_t outputs = 0;   // every tower's layer outputs for a batch
    std::int64_t exchange = 0;  // the gradients sent to and received from other processes
    // Every tower's sum of its gradients over the batches it accumulates (TrainConfig::accumulate
    // above 1: addAccumulation).
    std::int64_t accumulated = 0;
    // What reading a checkpoint holds beside the towers: a read-back's largest tensor, or what
    // the run reads at its start (StartRead).
    std::int64_t checkpoint = 0;
    std::int64_t heldSet = 0; // a GPU's copy of the training set (TrainConfig::gpuData)
    // Address space the run's threads set aside (cpu::threadsAddressSpace): counted against an
    // address-space limit only.
    std::int64_t threads = 0;

    // What the run cannot train without.
    std::int64_t floor() const
    {
        return replicas + optimizer + average + outputs + exchange + accumulated + heldSet +
               threads;
    }
    // That, while it writes a checkpoint (or, resuming, reads one).
    std::int64_t total() const { return floor() + checkpoint; }
    // "weights and gradients of 2 tower(s) 1.8 GiB, optimizer state 904 MiB, ...": floor()'s.
    std::string parts() const;
};

// The threads a training process starts besides its towers' teams: the batch loader's, the
// metrics and event writers' (six in all with the main thread for 2 towers of 1 thread, as
// counted), whose address space an address-space limit counts (MemoryNeed::threads).
constexpr int kThreadsBesidesTowers = 4;

// The address space a run of `c` sets aside for its threads (cpu::threadsAddressSpace of its
// towers' teams and kThreadsBesidesTowers), `here` processes sharing the machine's cores: what an
// address-space limit counts beside its memory (MemoryNeed::threads).
std::int64_t runThreadsAddressSpace(const TrainConfig& c, int here = 1);

// What of a network its needs follow from: the bytes of its parameters and buffers, of its
// trainable parameters, and its layers' float32 outputs for one example; its largest tensor's.
struct NetworkBytes
{
    std::int64_t weights = 0, trainable = 0, outputsPerExample = 0, largest = 0;
};
NetworkBytes networkBytes(const Model& model);

// What a run reads at its start beside its towers: no checkpoint, the one it resumes (read into
// the towers a tensor at a time), or the one it starts from (--init-from: the weights it takes,
// held until the towers have them).
enum class StartRead
{
    Nothing,
    Resume,
    InitFrom
};

// A network's needs, trained on `towers` CPU towers of `batchPerTower` examples with the optimizer
// `optimizer` ("sgd", "momentum", "nesterov", "adam": its state per parameter is its
// Optimizer::slotNames()), with a moving average or not, in one process of `processes` (more than
// one: a copy of the towers' gradients in flight at least, measured with two). The checkpoint part
// is the largest tensor (a checkpoint's read-back; a resume's, and the state rank 0 sends the
// other processes, a tensor at a time too), the weights more where the run starts --init-from.
MemoryNeed hostMemoryNeed(const NetworkBytes& network, int towers, std::int64_t batchPerTower,
                          const std::string& optimizer, bool average, int processes = 1,
                          StartRead start = StartRead::Nothing);
MemoryNeed hostMemoryNeed(const Model& model, int towers, std::int64_t batchPerTower,
                          const std::string& optimizer, bool average, int processes = 1,
                          StartRead start = StartRead::Nothing);

// `need` of towers that accumulate their gradients over `accumulate` batches per step
// (TrainConfig::accumulate): a sum of the trainable gradients more on each tower above 1.
void addAccumulation(MemoryNeed& need, const NetworkBytes& network, int accumulate);

// Before a run on CPU towers takes its memory: throws Error when it cannot fit in what this
// process may still take (cpu::sharedHostMemory, cpu::addressSpaceRoom), naming each part and the
// limit (taking it, the system would end the process without a word); returns a note when it may
// not fit while it writes a checkpoint (or reads the one it starts from, `start`), else
// "". The run's processes on this machine (each with its towers) share its memory; across
// processes (`group`), one refusing refuses the run on every one (a collective: every process
// calls it).
std::string checkHostMemory(const TrainConfig& config, ProcessGroup* group = nullptr,
                            StartRead start = StartRead::Nothing);

// What one GPU holds at least: the weights, gradients, optimizer state and a batch's layer outputs
// of each of its `towers` towers, `averages` moving averages (a process's tower 0 keeps its), and
// `heldSet` bytes of training sets (where the towers make their images there: a copy for each
// process with towers on the GPU). Its checkpoint part is 0: a checkpoint is copied to the host.
MemoryNeed gpuMemoryNeed(const NetworkBytes& network, int towers, std::int64_t batchPerTower,
                         const std::string& optimizer, int averages, std::int64_t heldSet);

// Before a run's GPU towers take their memory: throws Error when the towers on one of this
// process's GPUs (gpuOfTower over `gpuCount` GPUs) cannot fit in what is free on it, with those of
// the run's other processes that share it (the same machine and PCI bus id, `busIdOf(g)`; "":
// none shares it), each with its moving average and training set (every process tells the
// others, and asks, before any takes its memory), naming the GPU, each part and the free bytes
// (taking it, a tower would fail with DeviceOutOfMemory on its first steps). `freeBytes(g)` is
// CUDA's count of GPU g's free bytes, asked once per GPU here (0: CUDA cannot say; that GPU is not
// checked); `heldSet` the training set's bytes each process's towers keep on each of their GPUs (0:
// the host makes the images). CUDA's context, cuDNN's workspaces and the outputs' gradients come on
// top. Across processes (`group`), one refusing refuses the run on every one.
void checkGpuMemory(const TrainConfig& config, ProcessGroup* group, int gpuCount,
                    const std::function<std::uint64_t(int)>& freeBytes, std::int64_t heldSet,
                    const std::function<std::string(int)>& busIdOf = {});

// The check of the run's towers: checkHostMemory's on CPU towers, checkGpuMemory's over
// cudaBackend()'s GPUs on GPU towers (none: the towers say why), with its note ("" on GPUs).
// Collective as they are.
// `start`: what the run reads at its start (checkHostMemory's).
std::string checkMemory(const TrainConfig& config, ProcessGroup* group, std::int64_t heldSet = 0,
                        StartRead start = StartRead::Nothing);

} // namespace towers::engine
