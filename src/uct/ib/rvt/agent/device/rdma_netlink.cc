/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Two RDMA netlink requests over a NETLINK_RDMA socket, as libibverbs
 * makes them: a device dump (RDMA_NLDEV_CMD_GET) finds the device's index
 * by name; RDMA_NLDEV_CMD_GET_CHARDEV for its "uverbs" char device then
 * carries RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID (Linux 5.1+).
 */
#include "uct/ib/rvt/agent/device/rdma_netlink.h"

#include "uct/ib/rvt/common/unique_fd.h"

#include <linux/netlink.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>

namespace rvt::agent {

namespace {

/* The attributes of one reply that we care about. */
struct reply_attrs {
    std::string name;
    bool have_index    = false;
    uint32_t index     = 0;
    bool have_id       = false;
    uint32_t driver_id = 0;
};

bool read_u32(const char *data, size_t len, uint32_t &out)
{
    /* the kernel sends u32s; accept a u64 too */
    if (len != sizeof(uint32_t) && len != sizeof(uint64_t)) {
        return false;
    }
    uint64_t v = 0;
    std::memcpy(&v, data, len);
    out = static_cast<uint32_t>(v);
    return true;
}

reply_attrs parse_reply(const nlmsghdr *msg)
{
    reply_attrs r;
    auto *attr = reinterpret_cast<const nlattr *>(
            reinterpret_cast<const char *>(msg) + NLMSG_HDRLEN);
    int left = static_cast<int>(msg->nlmsg_len) - NLMSG_HDRLEN;
    while (left >= static_cast<int>(sizeof(nlattr)) &&
           attr->nla_len >= sizeof(nlattr) && attr->nla_len <= left) {
        const char *data = reinterpret_cast<const char *>(attr) + NLA_HDRLEN;
        size_t len       = attr->nla_len - NLA_HDRLEN;
        switch (attr->nla_type & NLA_TYPE_MASK) {
        case RDMA_NLDEV_ATTR_DEV_NAME:
            r.name.assign(data, strnlen(data, len));
            break;
        case RDMA_NLDEV_ATTR_DEV_INDEX:
            r.have_index = read_u32(data, len, r.index);
            break;
        case RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID:
            r.have_id = read_u32(data, len, r.driver_id);
            break;
        }
        int step = NLA_ALIGN(attr->nla_len);
        left -= step;
        attr = reinterpret_cast<const nlattr *>(
                reinterpret_cast<const char *>(attr) + step);
    }
    return r;
}

class nl_socket {
public:
    explicit nl_socket(std::string who) : m_who(std::move(who))
    {
    }

    /* Sends one request (type, flags, attributes already encoded) and
     * calls on_reply for each reply until the request is answered. */
    std::string
    exchange(uint16_t op, uint16_t flags, const std::string &attrs,
             const std::function<void(const reply_attrs &)> &on_reply)
    {
        if (!m_fd) {
            m_fd.reset(
                    socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_RDMA));
            if (!m_fd) {
                return m_who +
                       ": socket(NETLINK_RDMA) failed: " + std::strerror(errno);
            }
        }
        std::string req(NLMSG_HDRLEN, '\0');
        req += attrs;
        nlmsghdr hdr{};
        hdr.nlmsg_len   = static_cast<uint32_t>(req.size());
        hdr.nlmsg_type  = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op);
        hdr.nlmsg_flags = NLM_F_REQUEST | flags;
        hdr.nlmsg_seq   = ++m_seq;
        std::memcpy(req.data(), &hdr, sizeof(hdr));
        if (send(m_fd.get(), req.data(), req.size(), 0) < 0) {
            return m_who + ": send failed: " + std::strerror(errno);
        }
        const bool dump = flags & NLM_F_DUMP;
        alignas(nlmsghdr) char buf[16384];
        for (;;) {
            ssize_t n = recv(m_fd.get(), buf, sizeof(buf), 0);
            if (n < 0) {
                return m_who + ": recv failed: " + std::strerror(errno);
            }
            int len = static_cast<int>(n);
            for (auto *msg               = reinterpret_cast<nlmsghdr *>(buf);
                 NLMSG_OK(msg, len); msg = NLMSG_NEXT(msg, len)) {
                if (msg->nlmsg_type == NLMSG_DONE) {
                    return {};
                }
                if (msg->nlmsg_type == NLMSG_ERROR) {
                    auto *err = static_cast<nlmsgerr *>(NLMSG_DATA(msg));
                    if (err->error == 0) {
                        return {};
                    }
                    return m_who +
                           ": kernel error: " + std::strerror(-err->error);
                }
                on_reply(parse_reply(msg));
                if (!dump) {
                    return {};
                }
            }
        }
    }

private:
    std::string m_who;
    unique_fd m_fd;
    uint32_t m_seq = 0;
};

std::string attr(uint16_t type, const void *data, size_t len)
{
    nlattr a{};
    a.nla_type = type;
    a.nla_len  = static_cast<uint16_t>(NLA_HDRLEN + len);
    std::string out(reinterpret_cast<const char *>(&a), sizeof(a));
    out.append(static_cast<const char *>(data), len);
    out.resize(NLA_ALIGN(out.size()), '\0');
    return out;
}

} // namespace

result<uint32_t> uverbs_driver_id(std::string_view ibdev_name)
{
    nl_socket nl("RDMA netlink query for device '" + std::string(ibdev_name) +
                 "'");
    bool found      = false;
    uint32_t index  = 0;
    std::string err = nl.exchange(RDMA_NLDEV_CMD_GET, NLM_F_DUMP, {},
                                  [&](const reply_attrs &r) {
                                      if (r.name == ibdev_name &&
                                          r.have_index) {
                                          found = true;
                                          index = r.index;
                                      }
                                  });
    if (!err.empty()) {
        return failure{err};
    }
    if (!found) {
        return failure{"RDMA netlink query for device '" +
                       std::string(ibdev_name) + "': no such RDMA device"};
    }

    const char type[] = "uverbs";
    std::string attrs = attr(RDMA_NLDEV_ATTR_DEV_INDEX, &index, sizeof(index)) +
                        attr(RDMA_NLDEV_ATTR_CHARDEV_TYPE, type, sizeof(type));
    bool have_id = false;
    uint32_t id  = 0;
    err          = nl.exchange(RDMA_NLDEV_CMD_GET_CHARDEV, 0, attrs,
                               [&](const reply_attrs &r) {
                          have_id = r.have_id;
                          id      = r.driver_id;
                      });
    if (!err.empty()) {
        return failure{err};
    }
    if (!have_id) {
        return failure{"RDMA netlink query for device '" +
                       std::string(ibdev_name) +
                       "': the kernel reports no uverbs driver id (needs "
                       "Linux 5.1+)"};
    }
    return id;
}

} // namespace rvt::agent
