/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * spank_rvt.so: rvt's SPANK plugin, which puts each job's agents (rvtd)
 * inside the job (docs/operations.md, "Under Slurm: the agents inside
 * their job"). Built against the spank.h of the Slurm that loads it
 * (SPANK refuses a plugin of another major.minor). Three parts, by where
 * Slurm calls it:
 *
 *  1. sbatch, salloc, srun (allocator and local context): the option
 *     --rvt[=yes|no]. Its value reaches the job's Prolog as SPANK_RVT
 *     (spank_job_control_setenv); the Prolog (contrib/slurm/rvt-slurm)
 *     decides, by its site's RVT_JOBS, whether the job gets agents, and
 *     if so writes the job file /run/rvt/jobs/<job> (root's, 0644): one
 *     KEY=VALUE a line, job, mode, rvtd, devices, cpus, priority, args,
 *     runtime_dir, preload.
 *
 *  2. the job's extern step (PrologFlags=Contain; slurmstepd, as root),
 *     slurm_spank_task_post_fork: when the job file says mode=extern, one
 *     agent per device: `rvtd --notify-fd=3 --device= --port=
 *     --job-key=slurm.<job> --linger=0 <args>` as the job's user, in the
 *     foreground: the extern step's child, in its cgroup (the job's CPUs
 *     and memory), signalled by Slurm's process tracking when the job
 *     ends (the Epilog is not needed), and sent SIGTERM by the kernel if
 *     this slurmstepd dies first (PR_SET_PDEATHSIG). Slurm runs this
 *     after the Prolog and before any other step of the job starts on the
 *     node, so the agents serve before the first rank. This waits for
 *     each agent's word ('R': it serves), sets the job file's priority on
 *     its threads as root (SCHED_FIFO with reset-on-fork, or nice), and
 *     lists the agents that serve in /run/rvt/jobs/<job>.agents (a line
 *     DEV:PORT=PID each; the prolog writes it in its own mode). An agent
 *     that does not start is logged (slurmd's log) and the job runs on.
 *     slurm_spank_exit reaps them. They are not added to the step's
 *     accounting: that takes slurm_stepd_add_extern_pid, which no header
 *     of Slurm's declares and whose arguments changed between releases.
 *
 *  3. every other step of a job with a job file (the batch step, srun's
 *     steps; slurm_spank_task_init, as the user, before exec): the task
 *     gets the module appended to LD_PRELOAD (never replacing what is
 *     there), RVT_RUNTIME_DIR when the site set one, and, when every
 *     device's agent serves (the .agents file), UCX_RVT_START_AGENT=n.
 *
 * Failures on the nodes never fail the job: they are logged and 0
 * returned (only a --rvt value that is neither yes nor no is refused, at
 * submission). No exception leaves a callback.
 */
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#define RVT_SPANK_EXPORT __attribute__((visibility("default")))

/* SPANK_PLUGIN(rvt, 1), spelled out: in C++ a namespace-scope const has
 * internal linkage unless declared extern. */
extern "C" {
RVT_SPANK_EXPORT extern const char plugin_name[]          = "rvt";
RVT_SPANK_EXPORT extern const char plugin_type[]          = "spank";
RVT_SPANK_EXPORT extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
RVT_SPANK_EXPORT extern const unsigned int spank_plugin_version = 1;
}

namespace {

const char *const jobs_dir = "/run/rvt/jobs";
/* How long the extern step waits for all of a job's agents to serve. */
constexpr std::chrono::seconds start_timeout{60};
/* How long slurm_spank_exit waits after SIGTERM before SIGKILL. */
constexpr int exit_wait_ms = 2000;

/* --rvt's value as given on this command line: "yes", "no", or empty */
std::string g_asked;
/* the agents this extern step started: reaped by slurm_spank_exit */
std::vector<pid_t> g_agents;

int rvt_option(int, const char *optarg, int remote)
{
    if (remote) {
        return 0;
    }
    /* srun in a job submitted with a bare --rvt finds it in its
     * environment as SLURM_SPANK__SLURM_SPANK_OPTION_rvt_rvt=(null):
     * Slurm prints the missing argument so */
    std::string v = optarg != nullptr ? optarg : "";
    if (v.empty() || v == "(null)") {
        v = "yes";
    }
    if (v != "yes" && v != "no") {
        slurm_error("--rvt=%s: expected --rvt, --rvt=yes or --rvt=no",
                    v.c_str());
        return -1;
    }
    g_asked = v;
    return 0;
}

struct spank_option rvt_opt = {
        const_cast<char *>("rvt"),
        const_cast<char *>("yes|no"),
        const_cast<char *>(
                "rvt: start this job's rvt agents inside it on every node "
                "(no: none, where the site starts them for every job)"),
        2,
        0,
        rvt_option};

bool in_extern_step(spank_t sp)
{
    uint32_t step = 0;
    return spank_remote(sp) == 1 &&
           spank_get_item(sp, S_JOB_STEPID, &step) == ESPANK_SUCCESS &&
           step == SLURM_EXTERN_CONT;
}

/* A directory or file root alone may change: owned by root, written by
 * no one else, not a symbolic link. */
bool roots_own(const struct stat &st)
{
    return st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

/* The job file's settings; nullopt when there is none (the job gets no
 * agents), or, said in why, when it cannot be trusted or read. */
std::optional<std::map<std::string, std::string>>
read_job_file(uint32_t job, const std::string &suffix, std::string &why)
{
    for (const char *dir : {"/run/rvt", jobs_dir}) {
        struct stat st;
        if (::lstat(dir, &st) != 0) {
            return std::nullopt;
        }
        if (!S_ISDIR(st.st_mode) || !roots_own(st)) {
            why = std::string(dir) + " is not root's own directory: ignored";
            return std::nullopt;
        }
    }
    std::string path = std::string(jobs_dir) + "/" + std::to_string(job) +
                       suffix;
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno != ENOENT) {
            why = path + ": " + std::strerror(errno);
        }
        return std::nullopt;
    }
    struct stat st;
    std::string text;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !roots_own(st)) {
        ::close(fd);
        why = path + " is not a file of root's: ignored";
        return std::nullopt;
    }
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0 && text.size() < 65536) {
        text.append(buf, size_t(n));
    }
    ::close(fd);
    std::map<std::string, std::string> kv;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') {
            continue;
        }
        size_t eq = line.find('=');
        if (eq == std::string::npos) {
            continue;
        }
        kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    return kv;
}

std::vector<std::string> words(const std::string &s)
{
    std::vector<std::string> out;
    std::istringstream in(s);
    std::string w;
    while (in >> w) {
        out.push_back(w);
    }
    return out;
}

/* "dev" or "dev:port" as "dev:port" */
std::string device_port(const std::string &d)
{
    return d.find(':') == std::string::npos ? d + ":1" : d;
}

/* "0-3,5" into set; false on anything else */
bool parse_cpus(const std::string &list, cpu_set_t &set)
{
    CPU_ZERO(&set);
    std::istringstream in(list);
    std::string part;
    bool any = false;
    while (std::getline(in, part, ',')) {
        char *end = nullptr;
        long lo   = std::strtol(part.c_str(), &end, 10);
        long hi   = lo;
        if (end == part.c_str()) {
            return false;
        }
        if (*end == '-') {
            const char *from = end + 1;
            hi               = std::strtol(from, &end, 10);
            if (end == from) {
                return false;
            }
        }
        if (*end != '\0' || lo < 0 || hi < lo || hi >= CPU_SETSIZE) {
            return false;
        }
        for (long c = lo; c <= hi; ++c) {
            CPU_SET(c, &set);
        }
        any = true;
    }
    return any;
}

/* async-signal-safe, for the child between fork and exec */
void put(int fd, const char *s)
{
    size_t len = std::strlen(s);
    while (len > 0) {
        ssize_t n = ::send(fd, s, len, MSG_NOSIGNAL);
        if (n <= 0) {
            return;
        }
        s += n;
        len -= size_t(n);
    }
}

[[noreturn]] void child_fails(int fd, const char *what)
{
    int err = errno;
    char num[16];
    int i  = sizeof(num) - 1;
    num[i] = '\0';
    do {
        num[--i] = char('0' + err % 10);
        err /= 10;
    } while (err > 0 && i > 0);
    put(fd, "F");
    put(fd, what);
    put(fd, " (errno ");
    put(fd, num + i);
    put(fd, ")");
    ::_exit(127);
}

/* What one agent needs, made before the fork: the child only makes
 * system calls. */
struct launch {
    std::vector<std::string> argv_s, env_s;
    std::vector<char *> argv, env;
    std::vector<gid_t> groups;
    uid_t uid;
    gid_t gid;
    bool pin = false;
    cpu_set_t cpus;
    pid_t parent;
};

pid_t start_child(launch &l, int word_fd, int err_fd)
{
    pid_t pid = ::fork();
    if (pid != 0) {
        return pid;
    }
    /* the child: slurmstepd blocks signals and sets handlers of its own,
     * and runs at oom_score_adj -1000 */
    sigset_t all;
    sigemptyset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    struct sigaction dfl;
    std::memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; ++s) {
        ::sigaction(s, &dfl, nullptr);
    }
    int oom = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (oom >= 0) {
        [[maybe_unused]] ssize_t n = ::write(oom, "0", 1);
        ::close(oom);
    }
    /* fd 3: the word; 0: /dev/null; 1, 2: the parent's pipe until rvtd
     * logs to its file */
    int null = ::open("/dev/null", O_RDONLY);
    if (null < 0 || ::dup2(null, STDIN_FILENO) < 0 ||
        ::dup2(err_fd, STDOUT_FILENO) < 0 ||
        ::dup2(err_fd, STDERR_FILENO) < 0) {
        child_fails(word_fd, "spank_rvt: stdio");
    }
    if (::dup2(word_fd, 3) < 0) {
        child_fails(word_fd, "spank_rvt: dup2");
    }
    ::syscall(SYS_close_range, 4U, ~0U, 0U);
    if (l.pin && ::sched_setaffinity(0, sizeof(l.cpus), &l.cpus) != 0) {
        child_fails(3, "cannot pin the agent to the job file's cpus");
    }
    /* raw system calls: this thread alone (glibc's would signal the
     * others, which the child does not have) */
    if (::syscall(SYS_setgroups, l.groups.size(), l.groups.data()) != 0 ||
        ::syscall(SYS_setresgid, l.gid, l.gid, l.gid) != 0 ||
        ::syscall(SYS_setresuid, l.uid, l.uid, l.uid) != 0) {
        child_fails(3, "cannot become the job's user");
    }
    /* after the uid change, which clears it: SIGTERM when slurmstepd
     * (this thread of it) is gone */
    ::prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
    if (::getppid() != l.parent) {
        ::_exit(0);
    }
    ::execve(l.argv[0], l.argv.data(), l.env.data());
    child_fails(3, "cannot run rvtd");
}

std::string wait_text(int status)
{
    if (WIFEXITED(status)) {
        return "exit status " + std::to_string(WEXITSTATUS(status));
    }
    if (WIFSIGNALED(status)) {
        return "killed by signal " + std::to_string(WTERMSIG(status));
    }
    return "wait status " + std::to_string(status);
}

/* RVT_PRIORITY's fifo:N or nice:N on every thread of pid; "" when done */
std::string set_priority(pid_t pid, const std::string &priority)
{
    if (priority.empty() || priority == "normal") {
        return "";
    }
    bool fifo = priority.rfind("fifo:", 0) == 0;
    bool nice = priority.rfind("nice:", 0) == 0;
    char *end = nullptr;
    long v    = std::strtol(priority.c_str() + 5, &end, 10);
    if ((!fifo && !nice) || *end != '\0' || (fifo && (v < 1 || v > 99)) ||
        (nice && (v < -20 || v > 19))) {
        return "priority '" + priority + "': expected fifo:1-99 or nice:-20-19";
    }
    std::string dir = "/proc/" + std::to_string(pid) + "/task";
    DIR *d          = ::opendir(dir.c_str());
    if (d == nullptr) {
        return dir + ": " + std::strerror(errno);
    }
    std::string why;
    while (dirent *e = ::readdir(d)) {
        if (e->d_name[0] == '.') {
            continue;
        }
        pid_t tid = static_cast<pid_t>(std::atol(e->d_name));
        int rc;
        if (fifo) {
            sched_param p{};
            p.sched_priority = static_cast<int>(v);
            rc = ::sched_setscheduler(tid, SCHED_FIFO | SCHED_RESET_ON_FORK,
                                      &p);
        } else {
            rc = ::setpriority(PRIO_PROCESS, static_cast<id_t>(tid),
                               static_cast<int>(v));
        }
        if (rc != 0 && why.empty()) {
            why = "thread " + std::to_string(tid) + ": " + std::strerror(errno);
        }
    }
    ::closedir(d);
    return why;
}

/* Starts one agent and waits for its word until deadline: its pid, or -1
 * with why. */
pid_t start_agent(launch &l, std::chrono::steady_clock::time_point deadline,
                  std::string &why)
{
    int sv[2], ep[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        why = std::string("socketpair: ") + std::strerror(errno);
        return -1;
    }
    if (::pipe2(ep, O_CLOEXEC) != 0) {
        why = std::string("pipe: ") + std::strerror(errno);
        ::close(sv[0]);
        ::close(sv[1]);
        return -1;
    }
    /* the child's ends above stdio and 3, which it takes over */
    int word_end = ::fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
    int err_end  = ::fcntl(ep[1], F_DUPFD_CLOEXEC, 10);
    ::close(sv[1]);
    ::close(ep[1]);
    pid_t pid      = word_end < 0 || err_end < 0 ? -1 :
                                                   start_child(l, word_end, err_end);
    int fork_errno = errno;
    ::close(word_end);
    ::close(err_end);
    if (pid < 0) {
        ::close(sv[0]);
        ::close(ep[0]);
        why = std::string("fork: ") + std::strerror(fork_errno);
        return -1;
    }
    std::string word, err;
    bool word_open = true, err_open = true;
    while (word_open || err_open) {
        if (!word.empty() && word[0] == 'R') {
            break;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            why = "no word from it within " +
                  std::to_string(start_timeout.count()) + " s: killed";
            break;
        }
        pollfd p[2] = {{word_open ? sv[0] : -1, POLLIN, 0},
                       {err_open ? ep[0] : -1, POLLIN, 0}};
        int rc      = ::poll(p, 2, static_cast<int>(left.count()));
        if (rc < 0 && errno != EINTR) {
            why = std::string("poll: ") + std::strerror(errno);
            break;
        }
        char buf[512];
        for (int i = 0; i < 2; ++i) {
            if (p[i].revents == 0) {
                continue;
            }
            ssize_t n = ::read(p[i].fd, buf, sizeof(buf));
            if (n <= 0) {
                (i == 0 ? word_open : err_open) = false;
            } else if (i == 0) {
                word.append(buf, size_t(n));
            } else if (err.size() < 4096) {
                err.append(buf, size_t(n));
            }
        }
    }
    ::close(sv[0]);
    ::close(ep[0]);
    if (!word.empty() && word[0] == 'R') {
        return pid;
    }
    if (why.empty()) {
        why = word.size() > 1 && word[0] == 'F' ? word.substr(1) :
                                                  "it ended without a word";
    }
    int status = 0;
    pid_t r    = ::waitpid(pid, &status, WNOHANG);
    if (r == 0) {
        ::kill(pid, SIGKILL);
        r = ::waitpid(pid, &status, 0);
    }
    if (r == pid) {
        why += " (" + wait_text(status) + ")";
    }
    while (!err.empty() && err.back() == '\n') {
        err.pop_back();
    }
    if (!err.empty()) {
        why += "; its output: " + err;
    }
    return -1;
}

/* The extern step: the job file's agents, started and waited for. */
void start_agents(spank_t sp)
{
    uint32_t job = 0;
    uid_t uid    = 0;
    gid_t gid    = 0;
    if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS) {
        slurm_error("spank_rvt: the job's id, uid or gid is not known here: "
                    "no agents started");
        return;
    }
    std::string why;
    auto jf = read_job_file(job, "", why);
    if (!jf) {
        if (!why.empty()) {
            slurm_error("spank_rvt: job %u: %s: no agents started", job,
                        why.c_str());
        }
        return;
    }
    auto &kv = jf.value();
    if (kv["job"] != std::to_string(job)) {
        slurm_error("spank_rvt: job %u: the job file names job '%s': no "
                    "agents started",
                    job, kv["job"].c_str());
        return;
    }
    if (kv["mode"] != "extern") {
        return; /* the prolog started them */
    }
    const std::string key = "slurm." + std::to_string(job);
    launch base;
    base.uid    = uid;
    base.gid    = gid;
    base.parent = ::getpid();
    /* the job's supplementary groups, as its tasks have them */
    gid_t *gids = nullptr;
    int ngids   = 0;
    if (spank_get_item(sp, S_JOB_SUPPLEMENTARY_GIDS, &gids, &ngids) ==
                ESPANK_SUCCESS &&
        gids != nullptr) {
        base.groups.assign(gids, gids + ngids);
    }
    if (!kv["cpus"].empty()) {
        base.pin = parse_cpus(kv["cpus"], base.cpus);
        if (!base.pin) {
            slurm_error("spank_rvt: job %u: cpus '%s': expected a CPU list; "
                        "the agents are not pinned",
                        job, kv["cpus"].c_str());
        }
    }
    base.env_s = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                  "/sbin:/bin",
                  "HOME=/"};
    if (!kv["runtime_dir"].empty()) {
        base.env_s.push_back("RVT_RUNTIME_DIR=" + kv["runtime_dir"]);
    }
    std::string started_list;
    const auto deadline = std::chrono::steady_clock::now() + start_timeout;
    for (const auto &d : words(kv["devices"])) {
        std::string dp   = device_port(d);
        std::string dev  = dp.substr(0, dp.find(':'));
        std::string port = dp.substr(dp.find(':') + 1);
        launch l         = base;
        l.argv_s = {kv["rvtd"],       "--notify-fd=3",    "--device=" + dev,
                    "--port=" + port, "--job-key=" + key, "--linger=0"};
        for (auto &a : words(kv["args"])) {
            l.argv_s.push_back(a);
        }
        for (auto &a : l.argv_s) {
            l.argv.push_back(a.data());
        }
        l.argv.push_back(nullptr);
        for (auto &e : l.env_s) {
            l.env.push_back(e.data());
        }
        l.env.push_back(nullptr);
        std::string fail;
        pid_t pid = start_agent(l, deadline, fail);
        if (pid < 0) {
            slurm_error("spank_rvt: job %u: agent for %s on %s did not start: "
                        "%s",
                        job, key.c_str(), dp.c_str(), fail.c_str());
            continue;
        }
        g_agents.push_back(pid);
        std::string prio = set_priority(pid, kv["priority"]);
        if (!prio.empty()) {
            slurm_error(
                    "spank_rvt: job %u: agent %d: priority %s not set (%s): "
                    "it runs at normal priority",
                    job, int(pid), kv["priority"].c_str(), prio.c_str());
        }
        slurm_info("spank_rvt: job %u: agent for %s on %s started in the "
                   "extern step (pid %d, uid %u, cpus %s, priority %s)",
                   job, key.c_str(), dp.c_str(), int(pid), unsigned(uid),
                   kv["cpus"].empty() ? "the step's" : kv["cpus"].c_str(),
                   kv["priority"].empty() ? "normal" : kv["priority"].c_str());
        started_list += dp + "=" + std::to_string(pid) + "\n";
    }
    /* what serves, for the job's tasks (part 3) */
    std::string path = std::string(jobs_dir) + "/" + std::to_string(job) +
                       ".agents";
    std::string tmp = std::string(jobs_dir) + "/." + std::to_string(job) +
                      ".agents.new";
    int fd = ::open(tmp.c_str(),
                    O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                    0644);
    if (fd < 0 ||
        ::write(fd, started_list.data(), started_list.size()) !=
                ssize_t(started_list.size()) ||
        ::fchmod(fd, 0644) != 0 || ::close(fd) != 0 ||
        ::rename(tmp.c_str(), path.c_str()) != 0) {
        slurm_error("spank_rvt: job %u: cannot write %s: %s: the job's "
                    "ranks start their own agents",
                    job, path.c_str(), std::strerror(errno));
        ::unlink(tmp.c_str());
    }
}

/* whether list (LD_PRELOAD: ':' or ' ' apart) holds item */
bool holds(const std::string &list, const std::string &item)
{
    size_t at = 0;
    while (at <= list.size()) {
        size_t end = list.find_first_of(": ", at);
        if (end == std::string::npos) {
            end = list.size();
        }
        if (list.compare(at, end - at, item) == 0) {
            return true;
        }
        at = end + 1;
    }
    return false;
}

std::optional<std::string> task_env(spank_t sp, const char *name)
{
    std::vector<char> buf(4096);
    for (;;) {
        spank_err_t rc = spank_getenv(sp, name, buf.data(),
                                      static_cast<int>(buf.size()));
        if (rc == ESPANK_SUCCESS) {
            return std::string(buf.data());
        }
        if (rc != ESPANK_NOSPACE || buf.size() > (1u << 20)) {
            return std::nullopt;
        }
        buf.resize(buf.size() * 4);
    }
}

/* A task of any other step of a job with a job file. */
void set_task_env(spank_t sp)
{
    uint32_t job = 0;
    if (spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) {
        return;
    }
    std::string why;
    auto jf = read_job_file(job, "", why);
    if (!jf) {
        if (!why.empty()) {
            slurm_error("spank_rvt: job %u: %s", job, why.c_str());
        }
        return;
    }
    auto &kv = jf.value();
    if (kv["job"] != std::to_string(job)) {
        return;
    }
    const std::string &module = kv["preload"];
    if (!module.empty()) {
        auto old = task_env(sp, "LD_PRELOAD");
        if (!old || old->empty()) {
            spank_setenv(sp, "LD_PRELOAD", module.c_str(), 1);
        } else if (!holds(*old, module)) {
            spank_setenv(sp, "LD_PRELOAD", (*old + ":" + module).c_str(), 1);
        }
    }
    if (!kv["runtime_dir"].empty()) {
        spank_setenv(sp, "RVT_RUNTIME_DIR", kv["runtime_dir"].c_str(), 1);
    }
    /* the module starts none only when every device's agent serves */
    auto agents = read_job_file(job, ".agents", why);
    if (!agents) {
        return;
    }
    auto devices = words(kv["devices"]);
    bool all     = !devices.empty();
    for (auto &d : devices) {
        all = all && agents->count(device_port(d)) != 0;
    }
    if (all) {
        spank_setenv(sp, "UCX_RVT_START_AGENT", "n", 1);
    }
}

/* slurm_spank_exit in the extern step: any agent still running (Slurm's
 * process tracking has normally ended them) gets SIGTERM, then SIGKILL;
 * all are reaped. */
void reap_agents()
{
    for (pid_t pid : g_agents) {
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) != 0) {
            continue;
        }
        ::kill(pid, SIGTERM);
        for (int waited = 0; waited < exit_wait_ms; waited += 50) {
            if (::waitpid(pid, &status, WNOHANG) != 0) {
                break;
            }
            ::usleep(50000);
        }
        if (::waitpid(pid, &status, WNOHANG) == 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
        }
        slurm_info("spank_rvt: agent %d was still running at the extern "
                   "step's end: stopped",
                   int(pid));
    }
    g_agents.clear();
}

} // namespace

extern "C" {

RVT_SPANK_EXPORT int slurm_spank_init(spank_t sp, int, char **)
{
    try {
        switch (spank_context()) {
        case S_CTX_LOCAL:
        case S_CTX_REMOTE:
        case S_CTX_ALLOCATOR:
            if (spank_option_register(sp, &rvt_opt) != ESPANK_SUCCESS) {
                slurm_error("spank_rvt: cannot register --rvt");
            }
            break;
        default:
            break;
        }
    } catch (...) {
    }
    return 0;
}

RVT_SPANK_EXPORT int slurm_spank_init_post_opt(spank_t sp, int, char **)
{
    try {
        spank_context_t c = spank_context();
        if ((c == S_CTX_LOCAL || c == S_CTX_ALLOCATOR) && !g_asked.empty() &&
            spank_job_control_setenv(sp, "RVT", g_asked.c_str(), 1) !=
                    ESPANK_SUCCESS) {
            slurm_error("spank_rvt: --rvt=%s cannot reach the prolog",
                        g_asked.c_str());
        }
    } catch (...) {
    }
    return 0;
}

RVT_SPANK_EXPORT int slurm_spank_task_post_fork(spank_t sp, int, char **)
{
    try {
        if (in_extern_step(sp)) {
            start_agents(sp);
        }
    } catch (const std::exception &e) {
        slurm_error("spank_rvt: %s: no agents started", e.what());
    } catch (...) {
    }
    return 0;
}

RVT_SPANK_EXPORT int slurm_spank_task_init(spank_t sp, int, char **)
{
    try {
        if (spank_remote(sp) == 1 && !in_extern_step(sp)) {
            set_task_env(sp);
        }
    } catch (...) {
    }
    return 0;
}

RVT_SPANK_EXPORT int slurm_spank_exit(spank_t sp, int, char **)
{
    try {
        if (!g_agents.empty() && in_extern_step(sp)) {
            reap_agents();
        }
    } catch (...) {
    }
    return 0;
}

} // extern "C"
