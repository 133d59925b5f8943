/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Never two agents for the same key: an agent runs only while it holds an
 * exclusive flock() on its lock file (runtime_dir.h names it), taken
 * without waiting. The second agent for a (uid, device, port, job key),
 * whether in another process or in this one, gets a refusal saying that
 * another agent holds the lock and which pid it is (the holder writes its
 * pid into the file).
 *
 * flock() rather than fcntl() locks: a flock belongs to the open file
 * description, so a second open() of the same file conflicts even within
 * one process, and the kernel drops it when the last fd to it closes:
 * when the owner is destroyed or its process dies in any way, SIGKILL
 * included, so a crashed agent never leaves a stale lock. Consequences:
 * the fd is O_CLOEXEC, so an exec'd program does not inherit the lock,
 * but a fork()ed child shares it until both have closed it (a daemonizing
 * agent may take the lock before forking and let the parent exit). The
 * file itself is left in place on release: unlinking it would let one
 * agent lock a file that is already gone while another creates a new one.
 */
#ifndef RVT_AGENT_INSTANCE_LOCK_H
#define RVT_AGENT_INSTANCE_LOCK_H

#include "uct/ib/rvt/common/result.h"
#include "uct/ib/rvt/common/unique_fd.h"

#include <string>

namespace rvt::agent {

class instance_lock {
public:
    /* Opens (creating it 0600, refusing a symbolic link or non-regular
     * file) and locks path, or says who holds it. */
    static result<instance_lock> acquire(const std::string &path);

    instance_lock(instance_lock &&) noexcept = default;
    instance_lock &operator=(instance_lock &&other) noexcept;
    ~instance_lock();

    const std::string &path() const noexcept
    {
        return m_path;
    }

    /* Writes the calling process's pid into the lock file: a daemon calls
     * it after forking, since the lock (shared by the forked copies of
     * its descriptor) then belongs to a different process. */
    result<done> record_pid() const;

private:
    instance_lock(std::string path, unique_fd fd) noexcept;
    void release() noexcept;

    std::string m_path;
    unique_fd m_fd;
};

} // namespace rvt::agent

#endif
