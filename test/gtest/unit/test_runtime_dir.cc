/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the agent's per-user directory (common/runtime_dir.h): the
 * base chosen from XDG_RUNTIME_DIR, a directory created 0700 whatever the
 * umask, and refusal, naming the path and the fault, of every directory
 * someone else could have prepared for us (symbolic link, other owner,
 * wrong mode, not a directory); then the socket, lock and log names,
 * their validation, and the sockaddr_un length limit.
 */
#include "uct/ib/rvt/common/runtime_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

using namespace rvt;

namespace {

bool make_file(const std::string &path)
{
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                    0600);
    return fd >= 0 && ::close(fd) == 0;
}

class runtime_dir_fixture : public ::testing::Test {
protected:
    void SetUp() override
    {
        char tmpl[] = "/tmp/rvt-rundir-test.XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        m_base = tmpl;
        m_uid  = ::geteuid();
        m_dir  = m_base + "/rvt-" + std::to_string(m_uid);
    }

    void TearDown() override
    {
        std::filesystem::remove_all(m_base);
    }

    /* rule 2 of runtime_dir.h out of the way: the machine's /run/rvt
     * may hold a directory of ours */
    runtime_bases no_system_dir()
    {
        return {m_base + "/no-system-dir", "/tmp"};
    }

    mode_t mode_of(const std::string &path)
    {
        struct stat st;
        EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
        return st.st_mode & 07777;
    }

    /* ensure_runtime_dir must refuse, naming the directory and want. */
    void expect_refused(uid_t uid, const std::string &want)
    {
        auto r = ensure_runtime_dir(m_base, uid);
        ASSERT_FALSE(r.ok()) << "accepted " << r.value();
        std::string dir = m_base + "/rvt-" + std::to_string(uid);
        EXPECT_NE(r.error().find(dir), std::string::npos) << r.error();
        EXPECT_NE(r.error().find(want), std::string::npos) << r.error();
    }

    std::string m_base;
    uid_t m_uid;
    std::string m_dir;
};

} // namespace

TEST_F(runtime_dir_fixture, base_is_xdg_when_it_is_ours)
{
    EXPECT_EQ(runtime_base(env_from({{"XDG_RUNTIME_DIR", m_base}}), m_uid),
              m_base);
}

TEST_F(runtime_dir_fixture, base_falls_back_to_tmp)
{
    EXPECT_EQ(runtime_base(env_from({}), m_uid), "/tmp");
    EXPECT_EQ(runtime_base(env_from({{"XDG_RUNTIME_DIR", ""}}), m_uid), "/tmp");
    /* not ours */
    EXPECT_EQ(runtime_base(env_from({{"XDG_RUNTIME_DIR", m_base}}), m_uid + 1),
              "/tmp");
    /* missing, relative, not a directory */
    EXPECT_EQ(runtime_base(env_from({{"XDG_RUNTIME_DIR", m_base + "/none"}}),
                           m_uid),
              "/tmp");
    EXPECT_EQ(runtime_base(env_from({{"XDG_RUNTIME_DIR", "relative"}}), m_uid),
              "/tmp");
    std::string file = m_base + "/file";
    ASSERT_TRUE(make_file(file));
    EXPECT_EQ(runtime_base(env_from({{"XDG_RUNTIME_DIR", file}}), m_uid),
              "/tmp");
}

TEST_F(runtime_dir_fixture, created_0700_whatever_the_umask)
{
    mode_t old = ::umask(0277); /* would make mkdir(0700) give 0500 */
    auto r     = ensure_runtime_dir(m_base, m_uid);
    ::umask(old);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r.value(), m_dir);
    EXPECT_EQ(mode_of(m_dir), 0700u);

    /* an existing good one is accepted as it is */
    auto again = ensure_runtime_dir(m_base + "/", m_uid);
    ASSERT_TRUE(again.ok()) << again.error();
    EXPECT_EQ(again.value(), m_dir);
}

TEST_F(runtime_dir_fixture, symbolic_link_is_refused)
{
    /* even to a directory that would itself pass */
    std::string target = m_base + "/real";
    ASSERT_EQ(::mkdir(target.c_str(), 0700), 0);
    ASSERT_EQ(::symlink(target.c_str(), m_dir.c_str()), 0);
    expect_refused(m_uid, "symbolic link");
}

TEST_F(runtime_dir_fixture, dangling_symbolic_link_is_refused)
{
    ASSERT_EQ(::symlink((m_base + "/nowhere").c_str(), m_dir.c_str()), 0);
    expect_refused(m_uid, "symbolic link");
    EXPECT_FALSE(std::filesystem::exists(m_base + "/nowhere"));
}

TEST_F(runtime_dir_fixture, wrong_mode_is_refused_not_repaired)
{
    for (mode_t mode : {0755, 0777, 0711, 0500, 01700}) {
        ASSERT_EQ(::mkdir(m_dir.c_str(), 0700), 0);
        ASSERT_EQ(::chmod(m_dir.c_str(), mode), 0);
        char want[32];
        snprintf(want, sizeof(want), "mode 0%03o", unsigned(mode));
        expect_refused(m_uid, want);
        EXPECT_EQ(mode_of(m_dir), mode);
        ASSERT_EQ(::rmdir(m_dir.c_str()), 0);
    }
}

TEST_F(runtime_dir_fixture, not_a_directory_is_refused)
{
    ASSERT_TRUE(make_file(m_dir));
    expect_refused(m_uid, "not a directory");
}

/* Whoever we are: a directory made by this process is not another uid's. */
TEST_F(runtime_dir_fixture, directory_of_another_uid_is_refused)
{
    uid_t other     = m_uid + 1;
    std::string dir = m_base + "/rvt-" + std::to_string(other);
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    expect_refused(other, "owned by uid " + std::to_string(m_uid));
}

/* The attack itself: /tmp/rvt-<victim> pre-created by another user. */
TEST_F(runtime_dir_fixture, hostile_precreated_directory_is_refused)
{
    if (::geteuid() != 0) {
        GTEST_SKIP() << "needs root to chown to uid 65534";
    }
    ASSERT_EQ(::mkdir(m_dir.c_str(), 0700), 0);
    ASSERT_EQ(::chown(m_dir.c_str(), 65534, 65534), 0);
    expect_refused(m_uid, "owned by uid 65534");

    /* and for an ordinary victim uid, wide open as an attacker would */
    std::string victim = m_base + "/rvt-1000";
    ASSERT_EQ(::mkdir(victim.c_str(), 0777), 0);
    ASSERT_EQ(::chmod(victim.c_str(), 0777), 0);
    ASSERT_EQ(::chown(victim.c_str(), 65534, 65534), 0);
    expect_refused(1000, "owned by uid 65534");
}

TEST_F(runtime_dir_fixture, missing_base_is_an_error)
{
    auto r = ensure_runtime_dir(m_base + "/none", m_uid);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find(m_base + "/none/rvt-"), std::string::npos)
            << r.error();
    EXPECT_FALSE(ensure_runtime_dir("", m_uid).ok());
}

TEST(runtime_paths, names)
{
    auto p = make_agent_paths("/run/user/7/rvt-7", "rxe0", 1, "slurm.12.0");
    ASSERT_TRUE(p.ok()) << p.error();
    EXPECT_EQ(p.value().socket, "/run/user/7/rvt-7/rxe0-1.slurm.12.0.sock");
    EXPECT_EQ(p.value().lock, "/run/user/7/rvt-7/rxe0-1.slurm.12.0.lock");
    EXPECT_EQ(p.value().log, "/run/user/7/rvt-7/rxe0-1.slurm.12.0.log");

    auto q = make_agent_paths("/d", "mlx5_0.x-y", 255, "k");
    ASSERT_TRUE(q.ok()) << q.error();
    EXPECT_EQ(q.value().socket, "/d/mlx5_0.x-y-255.k.sock");
    EXPECT_EQ(q.value().log, "/d/mlx5_0.x-y-255.k.log");
}

TEST(runtime_paths, bad_device_is_refused)
{
    for (std::string dev :
         {std::string(""), std::string("mlx5/0"), std::string("rxe 0"),
          std::string("rxe:0"), std::string(64, 'd')}) {
        auto p = make_agent_paths("/d", dev, 1, "k");
        ASSERT_FALSE(p.ok()) << dev << " accepted";
        EXPECT_NE(p.error().find("device name"), std::string::npos)
                << p.error();
    }
    EXPECT_TRUE(make_agent_paths("/d", std::string(63, 'd'), 1, "k").ok());
}

TEST(runtime_paths, bad_port_is_refused)
{
    for (int port : {0, 256, -1, 65536}) {
        auto p = make_agent_paths("/d", "rxe0", port, "k");
        ASSERT_FALSE(p.ok()) << port << " accepted";
        EXPECT_NE(p.error().find("port " + std::to_string(port) + ":"),
                  std::string::npos)
                << p.error();
    }
}

TEST(runtime_paths, bad_job_key_is_refused)
{
    for (std::string key :
         {std::string(""), std::string("a/b"), std::string(64, 'k')}) {
        auto p = make_agent_paths("/d", "rxe0", 1, key);
        ASSERT_FALSE(p.ok()) << key << " accepted";
        EXPECT_NE(p.error().find("job key"), std::string::npos) << p.error();
    }
}

TEST(runtime_paths, socket_path_must_fit_sockaddr_un)
{
    /* dir + "/rxe0-1." + key + ".sock" is dir + 13 + key */
    std::string dir(50, 'd');
    dir[0]          = '/';
    std::string key = std::string(max_socket_path - 50 - 13, 'k');
    auto fits       = make_agent_paths(dir, "rxe0", 1, key);
    ASSERT_TRUE(fits.ok()) << fits.error();
    EXPECT_EQ(fits.value().socket.size(), 107u);
    EXPECT_EQ(fits.value().lock.size(), 107u);
    EXPECT_EQ(fits.value().log.size(), 106u);

    auto over = make_agent_paths(dir + "d", "rxe0", 1, key);
    ASSERT_FALSE(over.ok());
    EXPECT_NE(over.error().find("is 108 characters"), std::string::npos)
            << over.error();
    EXPECT_NE(over.error().find("at most 107"), std::string::npos)
            << over.error();
}

/* In a base of the user's own (here XDG_RUNTIME_DIR) a symbolic link where
 * the directory should be is refused, naming what to set (no other user
 * could have made it: a /tmp that others write to is rule 4's, below);
 * with it set every process of the job finds the same directory of the
 * user's own. */
TEST_F(runtime_dir_fixture, a_taken_directory_is_refused_naming_what_to_set)
{
    ASSERT_EQ(::symlink("/", m_dir.c_str()), 0);
    auto taken = user_runtime_dir(env_from({{"XDG_RUNTIME_DIR", m_base}}),
                                  m_uid, no_system_dir());
    ASSERT_FALSE(taken.ok()) << "accepted " << taken.value();
    EXPECT_NE(taken.error().find(m_dir + " is a symbolic link"),
              std::string::npos)
            << taken.error();
    EXPECT_NE(taken.error().find("set RVT_RUNTIME_DIR (or XDG_RUNTIME_DIR) to "
                                 "a directory of your own"),
              std::string::npos)
            << taken.error();

    const std::string own = m_base + "/own";
    ASSERT_EQ(::mkdir(own.c_str(), 0700), 0);
    const auto env = env_from(
            {{"XDG_RUNTIME_DIR", m_base}, {"RVT_RUNTIME_DIR", own}});
    auto dir = user_runtime_dir(env, m_uid, no_system_dir());
    ASSERT_TRUE(dir.ok()) << dir.error();
    EXPECT_EQ(dir.value(), own + "/rvt-" + std::to_string(m_uid));
    EXPECT_EQ(mode_of(dir.value()), 0700u);
    EXPECT_EQ(user_runtime_dir(env, m_uid, no_system_dir()).value(),
              dir.value())
            << "another process of the job finds the same";
}

TEST_F(runtime_dir_fixture, rvt_runtime_dir_not_the_users_own_is_refused)
{
    std::string file = m_base + "/file";
    ASSERT_TRUE(make_file(file));
    for (const std::string &bad :
         {std::string("relative"), std::string(""), m_base + "/none", file}) {
        auto r = user_runtime_dir(env_from({{"RVT_RUNTIME_DIR", bad}}), m_uid);
        ASSERT_FALSE(r.ok()) << bad << ": accepted " << r.value();
        EXPECT_EQ(r.error(), "RVT_RUNTIME_DIR=" + bad +
                                     ": expected the absolute path of a "
                                     "directory owned by uid " +
                                     std::to_string(m_uid));
    }
    auto other = user_runtime_dir(env_from({{"RVT_RUNTIME_DIR", m_base}}),
                                  m_uid + 1);
    EXPECT_FALSE(other.ok()) << "another uid's base was taken";
}

/* ---- a base others may write to (/tmp): runtime_dir.h, rule 4 -------- */

namespace {

class shared_base_fixture : public runtime_dir_fixture {
protected:
    void SetUp() override
    {
        runtime_dir_fixture::SetUp();
        ASSERT_EQ(::chmod(m_base.c_str(), 01777), 0);
        m_bases.system = m_base + "/no-system-dir";
        m_bases.shared = m_base;
    }

    result<std::string> find()
    {
        return user_runtime_dir(env_from({}), m_uid, m_bases);
    }

    std::string candidate(const char *hex)
    {
        return m_dir + "." + hex;
    }

    runtime_bases m_bases;
};

} // namespace

TEST_F(shared_base_fixture, the_plain_name_is_made_when_free)
{
    auto dir = find();
    ASSERT_TRUE(dir.ok()) << dir.error();
    EXPECT_EQ(dir.value(), m_dir);
    EXPECT_EQ(mode_of(m_dir), 0700u);
}

/* Another user's rvt-<uid> (a symbolic link here, which anyone can make
 * in /tmp) no longer denies rvt: a directory of the user's own is made
 * beside it, and every later process finds that one. */
TEST_F(shared_base_fixture, a_squatted_name_is_passed_by)
{
    ASSERT_EQ(::symlink("/", m_dir.c_str()), 0);
    auto dir = find();
    ASSERT_TRUE(dir.ok()) << dir.error();
    ASSERT_EQ(dir.value().size(), m_dir.size() + 17) << dir.value();
    EXPECT_EQ(dir.value().substr(0, m_dir.size() + 1), m_dir + ".");
    EXPECT_EQ(mode_of(dir.value()), 0700u);
    auto again = find();
    ASSERT_TRUE(again.ok()) << again.error();
    EXPECT_EQ(again.value(), dir.value()) << "a later process finds the same";
}

TEST_F(shared_base_fixture, the_first_valid_in_name_order_is_taken)
{
    ASSERT_EQ(::symlink("/", m_dir.c_str()), 0);
    const std::string later = candidate("0000000000000002");
    const std::string first = candidate("0000000000000001");
    ASSERT_EQ(::mkdir(later.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(later.c_str(), 0700), 0);
    ASSERT_EQ(::mkdir(first.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(first.c_str(), 0700), 0);
    auto dir = find();
    ASSERT_TRUE(dir.ok()) << dir.error();
    EXPECT_EQ(dir.value(), first);
}

/* What is not a 0700 directory of the user's, and what is not named as
 * rule 4 names them, is passed by, never taken or repaired. */
TEST_F(shared_base_fixture, invalid_candidates_and_other_names_are_passed_by)
{
    const std::string open = candidate("0000000000000001");
    ASSERT_EQ(::mkdir(open.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(open.c_str(), 0755), 0);
    const std::string odd = m_dir + ".not-hex";
    ASSERT_EQ(::mkdir(odd.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(odd.c_str(), 0700), 0);
    auto dir = find();
    ASSERT_TRUE(dir.ok()) << dir.error();
    EXPECT_EQ(dir.value(), m_dir);
    EXPECT_EQ(mode_of(open), 0755u) << "not repaired";
}

/* One made while another process made an earlier-named one: the process
 * takes the earlier and removes its own, so that the two agree. */
TEST_F(shared_base_fixture, a_process_that_made_one_late_takes_the_first)
{
    ASSERT_EQ(::symlink("/", m_dir.c_str()), 0);
    auto mine = find();
    ASSERT_TRUE(mine.ok()) << mine.error();
    const std::string earlier = candidate("0000000000000000");
    ASSERT_EQ(::mkdir(earlier.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(earlier.c_str(), 0700), 0);
    auto dir = find();
    ASSERT_TRUE(dir.ok()) << dir.error();
    EXPECT_EQ(dir.value(), earlier);
}

/* ---- /run/rvt/<uid>, made by root: runtime_dir.h, rule 2 ------------- */

TEST_F(runtime_dir_fixture, roots_system_directory_comes_before_tmp)
{
    if (::geteuid() != 0) {
        GTEST_SKIP() << "needs root: the system directory is root's";
    }
    const std::string sys = m_base + "/run-rvt";
    ASSERT_EQ(::mkdir(sys.c_str(), 0755), 0);
    ASSERT_EQ(::chmod(sys.c_str(), 0755), 0);
    const std::string mine = sys + "/" + std::to_string(m_uid);
    runtime_bases bases{sys, m_base};

    /* no <uid> in it: rule 2 does not apply */
    auto none = user_runtime_dir(env_from({}), m_uid, bases);
    ASSERT_TRUE(none.ok()) << none.error();
    EXPECT_EQ(none.value(), m_dir);

    ASSERT_EQ(::mkdir(mine.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(mine.c_str(), 0700), 0);
    auto dir = user_runtime_dir(env_from({}), m_uid, bases);
    ASSERT_TRUE(dir.ok()) << dir.error();
    EXPECT_EQ(dir.value(), mine);

    /* a wrong one there is refused, naming it */
    ASSERT_EQ(::chmod(mine.c_str(), 0755), 0);
    auto bad = user_runtime_dir(env_from({}), m_uid, bases);
    ASSERT_FALSE(bad.ok()) << "accepted " << bad.value();
    EXPECT_NE(bad.error().find(mine + " has mode 0755"), std::string::npos)
            << bad.error();

    /* a system directory others may write to is no system directory */
    ASSERT_EQ(::chmod(mine.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(sys.c_str(), 0777), 0);
    auto open = user_runtime_dir(env_from({}), m_uid, bases);
    ASSERT_TRUE(open.ok()) << open.error();
    EXPECT_EQ(open.value(), m_dir);
}
