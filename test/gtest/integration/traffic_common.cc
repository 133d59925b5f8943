/* SPDX-License-Identifier: BSD-3-Clause */
#include "traffic_common.h"

#include "node_session.h"

#include <infiniband/verbs.h>

#include <cstdio>
#include <cstdlib>

namespace rvt::test::traffic {

void die(const std::string &why)
{
    std::fprintf(stderr, "client: FAILED: %s\n", why.c_str());
    std::exit(1);
}

uint32_t parse_u32(std::string_view v, const char *name)
{
    char *end = nullptr;
    std::string s(v);
    unsigned long x = std::strtoul(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || x > 0xffffffffu) {
        die(std::string("--") + name + "=" + s + ": expected a number");
    }
    return static_cast<uint32_t>(x);
}

void parse_options(
        int argc, char **argv, job_options &job,
        const std::function<bool(std::string_view, std::string_view)> &other)
{
    for (int i = 1; i < argc; ++i) {
        std::string_view a = argv[i];
        auto eq            = a.find('=');
        auto name          = a.substr(0, eq);
        auto val = eq == std::string_view::npos ? "" : a.substr(eq + 1);
        if (name == "--dir") {
            job.dir = val;
        } else if (name == "--id") {
            job.id = parse_u32(val, "id");
        } else if (name == "--clients") {
            job.clients = parse_u32(val, "clients");
        } else if (name == "--size") {
            job.size = parse_u32(val, "size");
        } else if (!other(name, val)) {
            die("unknown argument " + std::string(a));
        }
    }
    if (job.dir.empty() || job.clients < 2 || job.id >= job.clients) {
        die("usage: --dir=DIR --id=ID --clients=N (N >= 2, ID < N)");
    }
}

std::unique_ptr<client::session> open_session()
{
    auto opened = open_node_session();
    if (!opened) {
        die(opened.error());
    }
    return std::move(opened).value();
}

client::memory_region
register_area(client::session &s, std::vector<uint8_t> &area)
{
    const int flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                      IBV_ACCESS_REMOTE_READ;
    auto mr = s.register_memory(area.data(), area.size(), flags);
    if (!mr) {
        die(mr.error());
    }
    return mr.value();
}

void check_rings(client::session &s)
{
    if (!s.healthy()) {
        die("the agent's rings are corrupt");
    }
}

bool publish(const std::string &dir, const std::string &name, const void *data,
             size_t size)
{
    const std::string tmp = dir + "/." + name;
    std::ofstream out(tmp, std::ios::binary);
    out.write(static_cast<const char *>(data),
              static_cast<std::streamsize>(size));
    out.close();
    return out && rename(tmp.c_str(), (dir + "/" + name).c_str()) == 0;
}

work_request write_to(const card &to, uint32_t peer, uint32_t length,
                      const void *local, uint32_t lkey, uint64_t offset)
{
    work_request w{};
    w.op             = static_cast<uint8_t>(work_op::rdma_write_imm);
    w.flags          = work_signaled;
    w.peer           = peer;
    w.dst_client     = to.client_index;
    w.dst_generation = static_cast<uint8_t>(to.client_generation);
    w.length         = length;
    w.local_addr     = reinterpret_cast<uint64_t>(local);
    w.lkey           = lkey;
    w.rkey           = to.rkey;
    w.remote_addr    = to.addr + offset;
    return w;
}

work_request am_to(const card &to, uint32_t peer, uint8_t am_id)
{
    work_request a{};
    a.op             = static_cast<uint8_t>(work_op::send_am);
    a.flags          = work_signaled;
    a.am_id          = am_id;
    a.peer           = peer;
    a.dst_client     = to.client_index;
    a.dst_generation = static_cast<uint8_t>(to.client_generation);
    return a;
}

} // namespace rvt::test::traffic
