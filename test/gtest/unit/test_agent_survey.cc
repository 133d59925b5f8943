/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvt-status --all (tools/agent_survey.h): the node's agents found in
 * their users' runtime directories, asked, and listed, answer or not.
 *
 * The agents are real: an attach server and engine on the loopback nic
 * each, in a child process running as its user (root, and uid 65534),
 * answering its status as rvtd does (agent/serve/status_header.h: the
 * header, the engine, the metrics). Their directories are made in a base
 * of the test's own, in the shapes of /run/rvt, /run/user and /tmp, with
 * what a user could leave there: a stale socket, a link to another
 * user's socket, a socket whose listener is not the directory's user, a
 * squatted directory. Becoming another user needs root: as another user
 * the cases skip (contrib/test-count.sh allows it).
 */
#include "test/gtest/unit/prometheus_parse.h"
#include "test/loopback/loopback_agent.h"

#include "uct/ib/rvt/agent/serve/status_header.h"
#include "uct/ib/rvt/common/attach_wire.h"
#include "uct/ib/rvt/common/status_json.h"
#include "uct/ib/rvt/common/unix_socket.h"
#include "uct/ib/rvt/tools/agent_survey.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace rvt;
using namespace std::chrono_literals;
using json = nlohmann::ordered_json;

namespace {

constexpr uid_t other_uid = 65534; /* nobody */

/* A loopback agent in a child process running as `uid`, serving
 * `socket` until the test closes its end of `ctl` (or, since a later
 * child may hold that end too, kills it). */
struct child_agent {
    pid_t pid = -1;
    int ctl   = -1;

    void stop()
    {
        if (pid > 0) {
            close(ctl);
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
            pid = -1;
        }
    }
};

/* The child's side: become uid, make the agent, say so, serve. */
[[noreturn]] void serve_as(uid_t uid, const std::string &socket,
                           const std::string &key, const std::string &device,
                           int port, int ready, int ctl)
{
    if (uid != 0 &&
        (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0)) {
        (void)!write(ready, "Esetresuid", 10);
        _exit(1);
    }
    agent::testing::loopback_fabric fabric;
    auto made = agent::testing::make_loopback_agent(
            fabric, {.socket = socket, .job_key = key});
    if (!made) {
        const std::string e = "E" + made.error();
        (void)!write(ready, e.data(), e.size());
        _exit(1);
    }
    auto &a = made.value();
    const agent::status_header h{.pid                 = getpid(),
                                 .agent_id            = 7,
                                 .job_key             = key,
                                 .job_key_source      = "--job-key",
                                 .device              = device,
                                 .port                = port,
                                 .driver_id           = 0,
                                 .pd_handle           = 0,
                                 .registration = wire::reg_mode::uverbs_ioctl,
                                 .registration_reason = "",
                                 .socket              = socket,
                                 .clients             = {}};
    (void)!write(ready, "R", 1);
    close(ready);
    for (;;) {
        pollfd p{ctl, POLLIN, 0};
        if (poll(&p, 1, 1) != 0) {
            _exit(0); /* the test closed it */
        }
        a.engine->progress(std::chrono::steady_clock::now());
        for (const agent::attach_event &ev : a.engine->serve_clients(0)) {
            a.server->answer_status(ev.ticket, agent::agent_status(h, *a.engine,
                                                                   ev.human));
        }
    }
}

child_agent start_agent_as(uid_t uid, const std::string &socket,
                           const std::string &key, const std::string &device,
                           int port)
{
    int ready[2], ctl[2];
    EXPECT_EQ(pipe2(ready, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(ctl, O_CLOEXEC), 0);
    const pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        close(ctl[1]);
        serve_as(uid, socket, key, device, port, ready[1], ctl[0]);
    }
    close(ready[1]);
    close(ctl[0]);
    char buf[512] = {};
    const ssize_t n = read(ready[0], buf, sizeof(buf) - 1);
    close(ready[0]);
    EXPECT_EQ(n, 1) << "the agent of uid " << uid << ": " << buf;
    return {pid, ctl[1]};
}

std::string name_of(uid_t uid)
{
    const passwd *pw = getpwuid(uid);
    return pw != nullptr ? pw->pw_name : std::to_string(uid);
}

/* Runs `argv` (as `uid`) and returns its stdout; `status` its exit
 * status. */
std::string run_as(uid_t uid, const std::vector<std::string> &argv,
                   int &status)
{
    int out[2];
    EXPECT_EQ(pipe(out), 0);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        close(out[0]);
        if (uid != 0 &&
            (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0)) {
            _exit(99);
        }
        std::vector<char *> args;
        for (const auto &a : argv) {
            args.push_back(const_cast<char *>(a.c_str()));
        }
        args.push_back(nullptr);
        execv(args[0], args.data());
        _exit(98);
    }
    close(out[1]);
    std::string text;
    char buf[4096];
    for (ssize_t n; (n = read(out[0], buf, sizeof(buf))) > 0;) {
        text.append(buf, static_cast<size_t>(n));
    }
    close(out[0]);
    waitpid(pid, &status, 0);
    status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return text;
}

class agent_survey : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (geteuid() != 0) {
            GTEST_SKIP() << "needs root to become another user";
        }
        char tmpl[] = "/tmp/rvt-survey-test.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        m_base = tmpl;
        ASSERT_EQ(chmod(m_base.c_str(), 0755), 0);
        /* as /tmp: rvt-<uid>, 0700, the user's own */
        m_root_dir  = mkdir_of(m_base + "/rvt-0", 0);
        m_other_dir = mkdir_of(m_base + "/rvt-" + std::to_string(other_uid),
                               other_uid);
        m_root  = start_agent_as(0, m_root_dir + "/dev0-1.job.a.sock", "job.a",
                                 "dev0", 1);
        m_other = start_agent_as(other_uid,
                                 m_other_dir + "/mlx5-0-2.slurm-7.sock",
                                 "slurm-7", "mlx5-0", 2);
        /* the other user's agent has a log file (daemonized), root's not */
        m_other_log = m_other_dir + "/mlx5-0-2.slurm-7.log";
        std::ofstream(m_other_log) << "serving\n";
        ASSERT_EQ(chown(m_other_log.c_str(), other_uid, other_uid), 0);
    }

    void TearDown() override
    {
        m_root.stop();
        m_other.stop();
        if (!m_base.empty()) {
            std::filesystem::remove_all(m_base);
        }
    }

    static std::string mkdir_of(const std::string &dir, uid_t uid)
    {
        EXPECT_EQ(mkdir(dir.c_str(), 0700), 0) << dir;
        EXPECT_EQ(chown(dir.c_str(), uid, uid), 0) << dir;
        return dir;
    }

    /* A socket file at `path` with nothing listening (an agent killed
     * before it could remove it), owned by `uid`. */
    static void stale_socket(const std::string &path, uid_t uid)
    {
        unique_fd s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        auto addr = unix_address(path);
        ASSERT_TRUE(addr.ok());
        ASSERT_EQ(bind(s.get(), reinterpret_cast<const sockaddr *>(
                                        &addr.value()),
                       sizeof(sockaddr_un)),
                  0);
        ASSERT_EQ(lchown(path.c_str(), uid, uid), 0);
    }

    /* The agents found under our base, asked. */
    tools::survey look(std::optional<uid_t> only = std::nullopt)
    {
        tools::survey_options o;
        o.bases   = {m_base};
        o.only    = only;
        o.timeout = 2s;
        return tools::survey_node(o);
    }

    std::string m_base, m_root_dir, m_other_dir, m_other_log;
    child_agent m_root, m_other;
};

const tools::surveyed_agent *by_socket(const tools::survey &s,
                                       const std::string &socket)
{
    for (const auto &a : s.agents) {
        if (a.found.socket == socket) {
            return &a;
        }
    }
    return nullptr;
}

std::string notes_of(const tools::survey &s)
{
    std::string out;
    for (const auto &n : s.notes) {
        out += n + "\n";
    }
    return out;
}

} // namespace

/* Root finds both users' agents and each answers it: who, what, its log;
 * an agent that cannot answer (a stale socket) is listed as gone, not
 * passed by. */
TEST_F(agent_survey, root_lists_two_users_agents_and_a_dead_one)
{
    stale_socket(m_root_dir + "/dev0-1.old.sock", 0);
    const tools::survey s = look();
    ASSERT_EQ(s.agents.size(), 3u) << tools::survey_text(s) << notes_of(s);

    const auto *a = by_socket(s, m_root_dir + "/dev0-1.job.a.sock");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->answer.kind, client::answer_kind::answered) << a->answer.why;
    EXPECT_EQ(a->found.uid, 0u);
    EXPECT_EQ(a->user, name_of(0));
    EXPECT_EQ(a->answer.pid, m_root.pid);
    EXPECT_EQ(a->job_key, "job.a");
    EXPECT_EQ(a->device, "dev0");
    EXPECT_EQ(a->port, 1);
    EXPECT_EQ(a->found.log, ""); /* none: a foreground agent's stderr */
    EXPECT_EQ(a->status["pid"], m_root.pid);

    const auto *b = by_socket(s, m_other_dir + "/mlx5-0-2.slurm-7.sock");
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(b->answer.kind, client::answer_kind::answered) << b->answer.why;
    EXPECT_EQ(b->found.uid, other_uid);
    EXPECT_EQ(b->user, name_of(other_uid));
    EXPECT_EQ(b->answer.pid, m_other.pid);
    EXPECT_EQ(b->answer.uid, other_uid);
    /* "mlx5-0-2.slurm-7" reads two ways; the agent's answer says which */
    EXPECT_EQ(b->device, "mlx5-0");
    EXPECT_EQ(b->port, 2);
    EXPECT_EQ(b->job_key, "slurm-7");
    EXPECT_EQ(b->found.log, m_other_log);
    EXPECT_TRUE(b->status["metrics"].is_object()) << b->status;

    const auto *old = by_socket(s, m_root_dir + "/dev0-1.old.sock");
    ASSERT_NE(old, nullptr);
    EXPECT_EQ(old->answer.kind, client::answer_kind::gone);
    EXPECT_NE(old->answer.why.find("Connection refused"), std::string::npos)
            << old->answer.why;
    EXPECT_EQ(old->job_key, "old");

    /* a line each, with what an admin needs to find the agent */
    const std::string text = tools::survey_text(s);
    std::istringstream in(text);
    std::vector<std::string> lines;
    for (std::string l; std::getline(in, l);) {
        lines.push_back(l);
    }
    ASSERT_EQ(lines.size(), 4u) << text;
    EXPECT_TRUE(lines[0].starts_with("UID")) << text;
    for (const char *col : {"USER", "PID", "JOB", "DEVICE:PORT", "CLIENTS",
                            "PEERS", "STATE", "LOG"}) {
        EXPECT_NE(lines[0].find(col), std::string::npos) << col;
    }
    const auto line_with = [&](const std::string &needle) {
        for (const auto &l : lines) {
            if (l.find(needle) != std::string::npos) {
                return l;
            }
        }
        return std::string();
    };
    const std::string lb = line_with("slurm-7");
    for (const std::string &want :
         {std::to_string(other_uid), name_of(other_uid),
          std::to_string(m_other.pid), std::string("mlx5-0:2"),
          std::string("serving"), m_other_log}) {
        EXPECT_NE(lb.find(want), std::string::npos) << want << " in " << lb;
    }
    const std::string la = line_with("job.a");
    EXPECT_NE(la.find("dev0:1"), std::string::npos) << la;
    EXPECT_NE(la.find("serving"), std::string::npos) << la;
    const std::string lo = line_with(" old ");
    EXPECT_NE(lo.find("gone"), std::string::npos) << lo;
    EXPECT_NE(lo.find("Connection refused"), std::string::npos) << lo;

    /* the JSON list: the same, and each answering agent's whole status */
    const json j = json::parse(status_json_text(tools::survey_json(s)));
    ASSERT_TRUE(j.is_array());
    ASSERT_EQ(j.size(), 3u);
    size_t serving = 0;
    for (const json &e : j) {
        serving += e["state"] == "serving";
        EXPECT_EQ(e["status"].is_object(), e["state"] == "serving") << e;
        EXPECT_EQ(e["why"].is_null(), e["state"] == "serving") << e;
    }
    EXPECT_EQ(serving, 2u);
}

/* A user sees their own agents, never another's. */
TEST_F(agent_survey, a_user_sees_their_own)
{
    const tools::survey s = look(other_uid);
    ASSERT_EQ(s.agents.size(), 1u) << tools::survey_text(s);
    EXPECT_EQ(s.agents[0].found.uid, other_uid);
    EXPECT_EQ(s.agents[0].answer.kind, client::answer_kind::answered);
}

/* What a user can leave in their directory to mislead root's look: a
 * link named as an agent's socket (to root's agent) is passed by, never
 * followed; a socket whose listener is not that user (a link swapped in
 * after the look, or root's own) is not asked; a directory named for a
 * user but owned by another is not theirs; and only the first valid of
 * a user's /tmp names is read, as their processes read. */
TEST_F(agent_survey, what_a_user_plants_is_passed_by_or_not_asked)
{
    const std::string link = m_other_dir + "/dev0-1.job.a.sock";
    ASSERT_EQ(symlink((m_root_dir + "/dev0-1.job.a.sock").c_str(),
                      link.c_str()),
              0);
    ASSERT_EQ(lchown(link.c_str(), other_uid, other_uid), 0);
    /* and one to a socket of the user's own elsewhere */
    const std::string elsewhere = m_base + "/dev0-1.own.sock";
    stale_socket(elsewhere, other_uid);
    const std::string link2 = m_other_dir + "/dev0-1.own.sock";
    ASSERT_EQ(symlink(elsewhere.c_str(), link2.c_str()), 0);
    ASSERT_EQ(lchown(link2.c_str(), other_uid, other_uid), 0);
    /* root listens on a socket in the user's directory, owned by them */
    const std::string foreign = m_other_dir + "/dev9-1.x.sock";
    unique_fd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    auto addr = unix_address(foreign);
    ASSERT_TRUE(addr.ok());
    ASSERT_EQ(bind(listener.get(),
                   reinterpret_cast<const sockaddr *>(&addr.value()),
                   sizeof(sockaddr_un)),
              0);
    ASSERT_EQ(listen(listener.get(), 4), 0);
    ASSERT_EQ(lchown(foreign.c_str(), other_uid, other_uid), 0);
    /* rvt-65533 squatted by root; a later name of 65534's */
    const std::string squat = mkdir_of(m_base + "/rvt-65533", 0);
    stale_socket(squat + "/dev0-1.squat.sock", 0);
    const std::string later = mkdir_of(m_base + "/rvt-" +
                                               std::to_string(other_uid) +
                                               ".00000000000000ff",
                                       other_uid);
    stale_socket(later + "/dev0-1.later.sock", other_uid);

    const tools::survey s = look();
    const std::string text = tools::survey_text(s) + notes_of(s);
    ASSERT_EQ(s.agents.size(), 3u) << text;
    for (const std::string &l : {link, link2}) {
        EXPECT_EQ(by_socket(s, l), nullptr) << text;
        EXPECT_NE(notes_of(s).find(l + ": not a socket of uid 65534: passed by"),
                  std::string::npos)
                << text;
    }
    const auto *f = by_socket(s, foreign);
    ASSERT_NE(f, nullptr) << text;
    EXPECT_EQ(f->answer.kind, client::answer_kind::foreign);
    EXPECT_EQ(f->answer.uid, 0u);
    EXPECT_NE(f->answer.why.find("runs as uid 0, not the directory's uid "
                                 "65534: not asked"),
              std::string::npos)
            << f->answer.why;
    /* it was connected to, and sent nothing */
    unique_fd conn(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    ASSERT_TRUE(conn);
    char byte;
    EXPECT_EQ(recv(conn.get(), &byte, 1, MSG_DONTWAIT), 0)
            << "the request was sent to a listener of another uid";
    EXPECT_NE(text.find("foreign"), std::string::npos) << text;
    for (const char *never : {"squat", "later"}) {
        EXPECT_EQ(text.find(never), std::string::npos) << never << ":\n"
                                                       << text;
    }
}

/* The shapes of /run/rvt (root's base, <uid> in it) and /run/user
 * (<uid>/rvt-<uid>) are found as /tmp's is; a base that is a link is not
 * read. */
TEST_F(agent_survey, the_run_rvt_and_run_user_shapes_are_found)
{
    const std::string sys = mkdir_of(m_base + "/system", 0);
    ASSERT_EQ(chmod(sys.c_str(), 0755), 0);
    const std::string sys_dir = mkdir_of(sys + "/" + std::to_string(other_uid),
                                         other_uid);
    stale_socket(sys_dir + "/dev0-1.sys.sock", other_uid);
    const std::string run_user = mkdir_of(m_base + "/user", 0);
    ASSERT_EQ(chmod(run_user.c_str(), 0755), 0);
    const std::string xdg = mkdir_of(run_user + "/" + std::to_string(other_uid),
                                     other_uid);
    const std::string xdg_dir = mkdir_of(xdg + "/rvt-" +
                                                 std::to_string(other_uid),
                                         other_uid);
    stale_socket(xdg_dir + "/dev0-1.xdg.sock", other_uid);
    const std::string link = m_base + "/linked";
    ASSERT_EQ(symlink(sys.c_str(), link.c_str()), 0);
    /* what is not the user's: a link for a system directory, a /run/user
     * directory of root's holding a valid-looking rvt-<uid> */
    const std::string real = mkdir_of(m_base + "/real", 65533);
    stale_socket(real + "/dev0-1.link.sock", 65533);
    ASSERT_EQ(symlink(real.c_str(), (sys + "/65533").c_str()), 0);
    const std::string not_theirs = mkdir_of(run_user + "/65533", 0);
    ASSERT_EQ(chmod(not_theirs.c_str(), 0755), 0);
    const std::string inside = mkdir_of(not_theirs + "/rvt-65533", 65533);
    stale_socket(inside + "/dev0-1.inside.sock", 65533);

    tools::survey_options o;
    o.bases               = {sys, run_user, link};
    const tools::survey s = tools::survey_node(o);
    ASSERT_EQ(s.agents.size(), 2u) << tools::survey_text(s) << notes_of(s);
    EXPECT_EQ(s.agents[0].found.socket, sys_dir + "/dev0-1.sys.sock");
    EXPECT_EQ(s.agents[1].found.socket, xdg_dir + "/dev0-1.xdg.sock");
    for (const auto &a : s.agents) {
        EXPECT_EQ(a.found.uid, other_uid);
        EXPECT_EQ(a.answer.kind, client::answer_kind::gone);
    }
}

/* A process of the user's own on a socket named as an agent's: one that
 * answers with what is not a status, one that refuses with terminal
 * escapes in its reason, one that never answers. Each is listed with
 * what happened, the look goes on within its timeout, and no control
 * character it sent reaches the terminal. */
TEST_F(agent_survey, a_fake_agent_is_listed_unreadable_refused_or_silent)
{
    enum class says { garbage, refusal, nothing };
    struct fake {
        std::string socket;
        says what;
        pid_t pid = -1;
    };
    std::vector<fake> fakes = {
            {m_other_dir + "/dev0-1.garbage.sock", says::garbage},
            {m_other_dir + "/dev0-1.refuses.sock", says::refusal},
            {m_other_dir + "/dev0-1.mute.sock", says::nothing}};
    for (fake &f : fakes) {
        int ready[2];
        ASSERT_EQ(pipe(ready), 0);
        f.pid = fork();
        if (f.pid == 0) {
            close(ready[0]);
            if (setresgid(other_uid, other_uid, other_uid) != 0 ||
                setresuid(other_uid, other_uid, other_uid) != 0) {
                _exit(1);
            }
            unique_fd l(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
            auto addr = unix_address(f.socket);
            if (!addr ||
                bind(l.get(), reinterpret_cast<const sockaddr *>(&addr.value()),
                     sizeof(sockaddr_un)) != 0 ||
                listen(l.get(), 4) != 0) {
                _exit(1);
            }
            (void)!write(ready[1], "R", 1);
            for (;;) {
                unique_fd c(accept4(l.get(), nullptr, nullptr, SOCK_CLOEXEC));
                wire::status_request req;
                if (!c || recv(c.get(), &req, sizeof(req), MSG_WAITALL) !=
                                  (ssize_t)sizeof(req)) {
                    continue;
                }
                if (f.what == says::nothing) {
                    pause(); /* holds the connection, says nothing */
                }
                if (f.what == says::refusal) {
                    auto rep = wire::make_refusal(
                            wire::attach_status::wrong_uid,
                            "\x1b[2J\x1b]0;owned\x07 go away");
                    (void)!send(c.get(), &rep, sizeof(rep), MSG_NOSIGNAL);
                    continue;
                }
                const std::string text = "\x1b[2J not json";
                auto hdr = wire::make_status_reply_header(text.size());
                (void)!send(c.get(), &hdr, sizeof(hdr), MSG_NOSIGNAL);
                (void)!send(c.get(), text.data(), text.size(), MSG_NOSIGNAL);
            }
        }
        close(ready[1]);
        char byte = 0;
        ASSERT_EQ(read(ready[0], &byte, 1), 1);
        close(ready[0]);
    }
    tools::survey_options o;
    o.bases   = {m_base};
    o.timeout = 300ms;
    const auto t0         = std::chrono::steady_clock::now();
    const tools::survey s = tools::survey_node(o);
    const auto took       = std::chrono::steady_clock::now() - t0;
    for (fake &f : fakes) {
        kill(f.pid, SIGKILL);
        waitpid(f.pid, nullptr, 0);
    }
    const std::string text = tools::survey_text(s);
    ASSERT_EQ(s.agents.size(), 5u) << text;
    const auto *g = by_socket(s, fakes[0].socket);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->answer.kind, client::answer_kind::unreadable);
    EXPECT_EQ(g->answer.why, "its answer is not a JSON object");
    EXPECT_EQ(g->answer.pid, fakes[0].pid);
    const auto *r = by_socket(s, fakes[1].socket);
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->answer.kind, client::answer_kind::refused);
    EXPECT_NE(text.find("(refused: ?[2J?]0;owned? go away)"), std::string::npos)
            << text;
    const auto *m = by_socket(s, fakes[2].socket);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->answer.kind, client::answer_kind::silent);
    EXPECT_NE(m->answer.why.find("no complete answer in time"),
              std::string::npos)
            << m->answer.why;
    EXPECT_EQ(text.find('\x1b'), std::string::npos) << text;
    EXPECT_EQ(text.find('\x07'), std::string::npos) << text;
    EXPECT_NE(text.find("unreadable"), std::string::npos) << text;
    EXPECT_NE(text.find("silent"), std::string::npos) << text;
    /* the real agents are served as ever, the look within a timeout or
     * two */
    EXPECT_EQ(by_socket(s, m_other_dir + "/mlx5-0-2.slurm-7.sock")->answer.kind,
              client::answer_kind::answered);
    EXPECT_LT(took, 2s);
}

/* The bounds: at most agents_per_dir sockets from a directory, and
 * agents in all, each cut said. */
TEST_F(agent_survey, a_directory_full_of_sockets_is_read_to_a_bound)
{
    for (int i = 0; i < 10; ++i) {
        stale_socket(m_other_dir + "/dev0-1.k" + std::to_string(i) + ".sock",
                     other_uid);
    }
    tools::survey_options o;
    o.bases                   = {m_base};
    o.bounds.agents_per_dir   = 4;
    const tools::survey s     = tools::survey_node(o);
    EXPECT_EQ(s.agents.size(), 1u + 4u) << tools::survey_text(s);
    EXPECT_NE(notes_of(s).find(m_other_dir + ": took its first 4 sockets"),
              std::string::npos)
            << notes_of(s);
    o.bounds.agents_per_dir = 64;
    o.bounds.agents         = 3;
    EXPECT_EQ(tools::survey_node(o).agents.size(), 3u);
}

/* The metrics of every agent, in one page a scraper takes: rvt_agent_up
 * for each (0 for the dead one), each family once, each answering
 * agent's sample labelled with its uid, job key, device and port. */
TEST_F(agent_survey, the_prometheus_page_has_every_agent)
{
    stale_socket(m_root_dir + "/dev0-1.old.sock", 0);
    const tools::survey s           = look();
    const prometheus_page page      = tools::survey_prometheus(s);
    EXPECT_TRUE(page.problems.empty()) << page.problems.front();
    const prometheus_test::page got = prometheus_test::parse(page.text);
    ASSERT_EQ(got.error, "") << page.text;
    const auto *up = got.find("rvt_agent_up");
    ASSERT_NE(up, nullptr);
    std::map<std::string, double> up_of;
    for (const auto &smp : up->samples) {
        up_of[smp.labels.at("uid") + " " + smp.labels.at("job_key") + " " +
              smp.labels.at("device") + ":" + smp.labels.at("port")] =
                smp.value;
    }
    EXPECT_EQ(up_of, (std::map<std::string, double>{{"0 job.a dev0:1", 1},
                                                    {"0 old dev0:1", 0},
                                                    {"65534 slurm-7 mlx5-0:2",
                                                     1}}));
    /* every metric the agents describe, a sample of each answering one */
    const auto *b = by_socket(s, m_other_dir + "/mlx5-0-2.slurm-7.sock");
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(b->answer.kind, client::answer_kind::answered) << b->answer.why;
    size_t metrics = 0;
    for (const auto &[name, m] : b->status["metrics"].items()) {
        const auto *fam = got.find(name);
        ASSERT_NE(fam, nullptr) << name;
        EXPECT_EQ(fam->type, m["type"].get<std::string>()) << name;
        EXPECT_EQ(fam->samples.size(), 2u) << name;
        ++metrics;
    }
    EXPECT_EQ(got.families.size(), metrics + 1);
    EXPECT_GE(metrics, 50u);
}

/* The program: root's rvt-status --all lists both users' agents, in
 * text, JSON and Prometheus; uid 65534's lists its own alone. */
TEST_F(agent_survey, rvt_status_all_as_root_and_as_a_user)
{
    /* a copy where uid 65534 may run it, whatever the build tree's
     * modes */
    const std::string prog = m_base + "/rvt-status";
    std::filesystem::copy_file(RVT_STATUS_PROGRAM, prog);
    ASSERT_EQ(chmod(prog.c_str(), 0755), 0);
    int rc = -1;
    std::string out =
            run_as(0, {prog, "--all", "--runtime-base=" + m_base}, rc);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("job.a"), std::string::npos) << out;
    EXPECT_NE(out.find("slurm-7"), std::string::npos) << out;
    EXPECT_NE(out.find(m_other_log), std::string::npos) << out;

    out = run_as(0, {prog, "--all", "--json", "--runtime-base=" + m_base}, rc);
    EXPECT_EQ(rc, 0) << out;
    const json j = json::parse(out, nullptr, false);
    ASSERT_TRUE(j.is_array()) << out;
    EXPECT_EQ(j.size(), 2u) << out;

    out = run_as(0, {prog, "--all", "--prometheus", "--runtime-base=" + m_base},
                 rc);
    EXPECT_EQ(rc, 0) << out;
    const prometheus_test::page got = prometheus_test::parse(out);
    ASSERT_EQ(got.error, "") << out;
    ASSERT_NE(got.find("rvt_handshake_sent_total"), nullptr) << out;
    EXPECT_EQ(got.find("rvt_handshake_sent_total")->samples.size(), 2u);

    /* one agent, by its socket, as root */
    out = run_as(0,
                 {prog, "--prometheus",
                  "--socket=" + m_other_dir + "/mlx5-0-2.slurm-7.sock"},
                 rc);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("rvt_agent_up{uid=\"65534\",job_key=\"slurm-7\","
                       "device=\"mlx5-0\",port=\"2\"} 1"),
              std::string::npos)
            << out;

    out = run_as(other_uid, {prog, "--all", "--runtime-base=" + m_base}, rc);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("slurm-7"), std::string::npos) << out;
    EXPECT_EQ(out.find("job.a"), std::string::npos) << out;
}
