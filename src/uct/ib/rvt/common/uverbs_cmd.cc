/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * REG_MR and DEREG_MR through RDMA_VERBS_IOCTL + UVERBS_METHOD_INVOKE_WRITE
 * (see uverbs_cmd.h for why). The command structs are the kernel's uAPI:
 * the ioctl carries the legacy command's input and output as attributes.
 */
#include "uct/ib/rvt/common/uverbs_cmd.h"

#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_ioctl.h>
#include <sys/ioctl.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

namespace rvt::uverbs {

namespace {

/* One RDMA_VERBS_IOCTL: the header (whose attrs[] is a flexible array,
 * so it is built in a byte buffer at call time) followed by up to
 * max_attrs attributes. */
class verbs_ioctl {
public:
    static constexpr uint16_t max_attrs = 5;

    verbs_ioctl(uint16_t object, uint16_t method, uint32_t driver_id) :
        m_object(object), m_method(method), m_driver_id(driver_id)
    {
    }

    /* Inputs of at most 8 bytes travel inline in .data, larger ones and
     * outputs by pointer: the kernel's rule for PTR_IN/PTR_OUT. */
    void add(uint16_t id, const void *ptr, size_t len, bool inline_ok)
    {
        ib_uverbs_attr &a = m_attrs[m_num_attrs++];
        a.attr_id         = id;
        a.len             = static_cast<uint16_t>(len);
        if (inline_ok && len <= sizeof(a.data)) {
            std::memcpy(&a.data, ptr, len);
        } else {
            a.data = reinterpret_cast<uintptr_t>(ptr);
        }
    }

    /* An object by its handle (an IDR attribute: the handle in .data). */
    void add_object(uint16_t id, uint32_t handle)
    {
        ib_uverbs_attr &a = m_attrs[m_num_attrs++];
        a.attr_id         = id;
        a.data            = handle;
    }

    int call(int fd)
    {
        ib_uverbs_ioctl_hdr hdr{};
        hdr.object_id = m_object;
        hdr.method_id = m_method;
        hdr.driver_id = static_cast<uint16_t>(m_driver_id);
        hdr.num_attrs = m_num_attrs;
        hdr.length    = static_cast<uint16_t>(
                sizeof(hdr) + m_num_attrs * sizeof(ib_uverbs_attr));
        alignas(8) std::byte buf[sizeof(hdr) + sizeof(m_attrs)];
        std::memcpy(buf, &hdr, sizeof(hdr));
        std::memcpy(buf + sizeof(hdr), m_attrs,
                    m_num_attrs * sizeof(ib_uverbs_attr));
        return ioctl(fd, RDMA_VERBS_IOCTL, buf);
    }

private:
    uint16_t m_object;
    uint16_t m_method;
    uint32_t m_driver_id;
    uint16_t m_num_attrs = 0;
    ib_uverbs_attr m_attrs[max_attrs]{};
};

/* An INVOKE_WRITE ioctl: the command number, then the core input and
 * output as attributes. */
class invoke_write : public verbs_ioctl {
public:
    invoke_write(uint32_t driver_id, uint64_t command) :
        verbs_ioctl(UVERBS_OBJECT_DEVICE, UVERBS_METHOD_INVOKE_WRITE, driver_id)
    {
        add(UVERBS_ATTR_WRITE_CMD, &command, sizeof(command), true);
    }
};

std::string errno_text(int err)
{
    return std::string(std::strerror(err)) + " (errno " + std::to_string(err) +
           ")";
}

} // namespace

result<mr_keys> reg_mr(const reg_args &args)
{
    ib_uverbs_reg_mr req{};
    req.start        = reinterpret_cast<uintptr_t>(args.addr);
    req.length       = args.length;
    req.hca_va       = args.iova;
    req.pd_handle    = args.pd_handle;
    req.access_flags = static_cast<uint32_t>(args.access);
    ib_uverbs_reg_mr_resp resp{};

    invoke_write c(args.driver_id, IB_USER_VERBS_CMD_REG_MR);
    c.add(UVERBS_ATTR_CORE_IN, &req, sizeof(req), true);
    c.add(UVERBS_ATTR_CORE_OUT, &resp, sizeof(resp), false);
    if (c.call(args.cmd_fd) != 0) {
        int err = errno;
        char what[160];
        std::snprintf(what, sizeof(what),
                      "REG_MR of %zu bytes at %p in PD handle %u (fd %d, "
                      "driver id %u) failed: ",
                      args.length, args.addr, args.pd_handle, args.cmd_fd,
                      args.driver_id);
        return failure{what + errno_text(err)};
    }
    return mr_keys{resp.mr_handle, resp.lkey, resp.rkey};
}

result<uint32_t> dereg_mr(int cmd_fd, uint32_t driver_id, uint32_t mr_handle)
{
    ib_uverbs_dereg_mr req{};
    req.mr_handle = mr_handle;

    invoke_write c(driver_id, IB_USER_VERBS_CMD_DEREG_MR);
    c.add(UVERBS_ATTR_CORE_IN, &req, sizeof(req), true);
    if (c.call(cmd_fd) != 0) {
        int err = errno;
        return failure{"DEREG_MR of MR handle " + std::to_string(mr_handle) +
                       " (fd " + std::to_string(cmd_fd) +
                       ") failed: " + errno_text(err)};
    }
    return mr_handle;
}

result<mr_info> query_mr(int cmd_fd, uint32_t driver_id, uint32_t mr_handle)
{
    mr_info info{};
    verbs_ioctl c(UVERBS_OBJECT_MR, UVERBS_METHOD_QUERY_MR, driver_id);
    c.add_object(UVERBS_ATTR_QUERY_MR_HANDLE, mr_handle);
    c.add(UVERBS_ATTR_QUERY_MR_RESP_LKEY, &info.keys.lkey,
          sizeof(info.keys.lkey), false);
    c.add(UVERBS_ATTR_QUERY_MR_RESP_RKEY, &info.keys.rkey,
          sizeof(info.keys.rkey), false);
    c.add(UVERBS_ATTR_QUERY_MR_RESP_LENGTH, &info.length, sizeof(info.length),
          false);
    c.add(UVERBS_ATTR_QUERY_MR_RESP_IOVA, &info.iova, sizeof(info.iova), false);
    if (c.call(cmd_fd) != 0) {
        int err = errno;
        return failure{"QUERY_MR of handle " + std::to_string(mr_handle) +
                       " (fd " + std::to_string(cmd_fd) +
                       ") failed: " + errno_text(err)};
    }
    info.keys.handle = mr_handle;
    return info;
}

} // namespace rvt::uverbs
