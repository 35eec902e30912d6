#pragma once
// A persistent worker thread for one tower. CPU towers need their own thread for life: the
// OpenMP team size (omp_set_num_threads) and the oneDNN stream and primitive cache belong to the
// thread that uses them, and rebuilding them every step would cost more than the step.
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace towers::engine {

class TowerThread
{
public:
    TowerThread();
    // Finishes the running job, if any, and joins the thread.
    ~TowerThread();
    TowerThread(const TowerThread&) = delete;
    TowerThread& operator=(const TowerThread&) = delete;

    // Starts `job` on the thread and returns at once. One job at a time: post() waits for the
    // previous one to be collected by wait().
    void post(std::function<void()> job);
    // Blocks until the posted job has finished; rethrows what it threw.
    void wait();

private:
    void loop();
    std::mutex m_mutex;
    std::condition_variable m_cv;
    std::function<void()> m_job;
    bool m_busy = false, m_quit = false;
    std::exception_ptr m_error;
    std::thread m_thread; // last: starts after the members it uses exist
};

} // namespace towers::engine
