#include "engine/dist/communicator.h"

#include <algorithm>

namespace towers::engine {

std::uint64_t Communicator::startAllReduceMean(int rank, std::span<Tensor> tensors)
{
    allReduceMean(rank, tensors);
    return 0;
}

void Communicator::complete(int rank, std::uint64_t ticket)
{
    (void)rank;
    (void)ticket;
}

void Communicator::attach(int rank, Ops& ops)
{
    (void)rank;
    (void)ops;
}

void requireSameLayout(const std::vector<std::span<Tensor>>& slots, const char* what,
                       const Device& device, std::initializer_list<DType> averaged)
{
    // Every rank checks every rank (cheap: a few dozen tensors), so that all of them refuse a bad
    // call together and none reads past a mismatched tensor.
    const auto& ref = slots.at(0);
    for (std::size_t rank = 0; rank < slots.size(); ++rank) {
        const auto& mine = slots[rank];
        auto fail = [&](const std::string& why) {
            throw InvalidArgument(std::string(what) + ": rank " + std::to_string(rank) + " " + why);
        };
        if (mine.size() != ref.size())
            fail("passed " + std::to_string(mine.size()) + " tensors, rank 0 passed " +
                 std::to_string(ref.size()));
        for (std::size_t i = 0; i < mine.size(); ++i) {
            const std::string tensor = "tensor " + std::to_string(i);
            if (mine[i].empty() || ref[i].empty()) fail(tensor + " is empty");
            if (mine[i].shape() != ref[i].shape() || mine[i].dtype() != ref[i].dtype())
                fail(tensor + " is " + mine[i].describe() + ", rank 0's is " + ref[i].describe());
            if (averaged.size() &&
                std::find(averaged.begin(), averaged.end(), mine[i].dtype()) == averaged.end()) {
                std::string kinds;
                for (DType t : averaged)
                    kinds += (kinds.empty() ? "" : " and ") + std::string(dtypeName(t));
                fail(tensor + " is " + mine[i].describe() + ": only " + kinds +
                     " tensors are averaged");
            }
            if (mine[i].device() != device)
                fail(tensor + " is " + mine[i].describe() + ", not on " + device.str());
        }
    }
}

} // namespace towers::engine
