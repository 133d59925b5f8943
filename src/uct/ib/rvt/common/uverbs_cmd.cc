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

/* An INVOKE_WRITE ioctl: the header (whose attrs[] is a flexible array,
 * so it is built in a byte buffer at call time) followed by up to three
 * attributes: the command number, the core input, the core output. */
class invoke_write {
public:
    invoke_write(uint32_t driver_id, uint64_t command) : m_driver_id(driver_id)
    {
        add(UVERBS_ATTR_WRITE_CMD, &command, sizeof(command), true);
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

    int call(int fd)
    {
        ib_uverbs_ioctl_hdr hdr{};
        hdr.object_id = UVERBS_OBJECT_DEVICE;
        hdr.method_id = UVERBS_METHOD_INVOKE_WRITE;
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
    uint32_t m_driver_id;
    uint16_t m_num_attrs = 0;
    ib_uverbs_attr m_attrs[3]{};
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

} // namespace rvt::uverbs
