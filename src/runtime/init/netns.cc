#include "runtime/init/netns.h"

#include <net/if.h>
#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include <string>

namespace ci::runtime {

SysError BringUpLoopback() {
  struct nl_sock* sock = nl_socket_alloc();
  if (sock == nullptr) return SysFailErr(ENOMEM, "nl_socket_alloc");
  struct rtnl_link* link = nullptr;
  struct rtnl_link* change = nullptr;
  SysError result;
  int err = nl_connect(sock, NETLINK_ROUTE);
  if (err < 0) {
    result = SysFailErr(-err, std::string("netlink connect: ") + nl_geterror(err));
  } else if ((err = rtnl_link_get_kernel(sock, 0, "lo", &link)) < 0) {
    result = SysFailErr(-err, std::string("get link lo: ") + nl_geterror(err));
  } else if ((change = rtnl_link_alloc()) == nullptr) {
    result = SysFailErr(ENOMEM, "rtnl_link_alloc");
  } else {
    rtnl_link_set_flags(change, IFF_UP);
    if ((err = rtnl_link_change(sock, link, change, 0)) < 0) {
      // libnl error codes are not errnos; keep the message, report EPERM-like context only.
      result = SysFailErr(EIO, std::string("set lo up: ") + nl_geterror(err));
    }
  }
  if (change != nullptr) rtnl_link_put(change);
  if (link != nullptr) rtnl_link_put(link);
  nl_socket_free(sock);
  return result;
}

}  // namespace ci::runtime
