/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A private munged for tests: its own key, socket and files in a
 * temporary directory, stopped at the end. Needs the munge package
 * (contrib/setup-deps.sh installs it); run as root or as the owner of
 * the directory, as munged demands.
 */
#ifndef RVT_TEST_MUNGED_FIXTURE_H
#define RVT_TEST_MUNGED_FIXTURE_H

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

namespace rvt::test {

class private_munged {
public:
    /* Empty error() when munged answers on socket(). */
    private_munged()
    {
        char tmpl[] = "/tmp/rvt-munged.XXXXXX";
        if (mkdtemp(tmpl) == nullptr) {
            m_error = "mkdtemp failed";
            return;
        }
        m_dir = tmpl;
        chmod(m_dir.c_str(), 0755); /* munged wants others to reach it */
        m_socket = m_dir + "/socket";
        if (!run("mungekey -c -b 1024 -k " + m_dir + "/key")) {
            m_error = "mungekey failed: is the munge package installed "
                      "(contrib/setup-deps.sh)?";
            return;
        }
        if (!run("munged -f -S " + m_socket + " --key-file=" + m_dir +
                 "/key --log-file=" + m_dir + "/log --pid-file=" + m_dir +
                 "/pid --seed-file=" + m_dir + "/seed")) {
            m_error = "munged did not start (log: " + m_dir + "/log)";
            return;
        }
        for (int i = 0; i < 100 && !std::filesystem::exists(m_socket); ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        if (!std::filesystem::exists(m_socket)) {
            m_error = "munged made no socket at " + m_socket;
        }
    }
    ~private_munged()
    {
        if (!m_socket.empty() && std::filesystem::exists(m_socket)) {
            run("munged -s -S " + m_socket);
        }
        if (!m_dir.empty()) {
            std::error_code ec;
            std::filesystem::remove_all(m_dir, ec);
        }
    }
    private_munged(const private_munged &)            = delete;
    private_munged &operator=(const private_munged &) = delete;

    const std::string &socket() const
    {
        return m_socket;
    }
    const std::string &error() const
    {
        return m_error;
    }

private:
    static bool run(const std::string &cmd)
    {
        return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0;
    }

    std::string m_dir;
    std::string m_socket;
    std::string m_error;
};

} // namespace rvt::test

#endif
