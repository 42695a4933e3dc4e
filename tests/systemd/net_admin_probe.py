#!/usr/bin/env python3
"""Sends the two CAP_NET_ADMIN-gated requests the agent makes, on loopback.

Prints "dcbnl_set=E ethtool_stunable=E", each E the negated errno the kernel
answered (0 on success). The kernel checks CAP_NET_ADMIN before it looks at the
device, so on `lo` (no DCB ops, no tunables) a caller with the capability gets
-95 (EOPNOTSUPP) and one without it gets -1 (EPERM). Nothing is changed.
"""
import ctypes
import fcntl
import socket
import struct

RTM_SETDCB = 79
DCB_CMD_IEEE_SET = 20
DCB_ATTR_IFNAME = 1
DCB_ATTR_IEEE = 13
NLA_F_NESTED = 0x8000
NLM_F_REQUEST_ACK = 0x1 | 0x4
NLMSG_ERROR = 2
SIOCETHTOOL = 0x8946
ETHTOOL_STUNABLE = 0x49
ETHTOOL_PFC_PREVENTION_TOUT = 3
ETHTOOL_TUNABLE_U16 = 2


def dcbnl_set(ifname):
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
    sock.bind((0, 0))
    name = ifname.encode() + b"\0"
    attrs = struct.pack("HH", 4 + len(name), DCB_ATTR_IFNAME) + name
    attrs += b"\0" * ((4 - len(attrs) % 4) % 4)
    attrs += struct.pack("HH", 4, DCB_ATTR_IEEE | NLA_F_NESTED)
    payload = struct.pack("BBH", socket.AF_UNSPEC, DCB_CMD_IEEE_SET, 0) + attrs
    sock.send(struct.pack("IHHII", 16 + len(payload), RTM_SETDCB, NLM_F_REQUEST_ACK, 1, 0) + payload)
    reply = sock.recv(65536)
    if struct.unpack("IHHII", reply[:16])[1] != NLMSG_ERROR:
        return 0
    return struct.unpack("i", reply[16:20])[0]


def ethtool_stunable(ifname):
    data = ctypes.create_string_buffer(
        struct.pack("IIII", ETHTOOL_STUNABLE, ETHTOOL_PFC_PREVENTION_TOUT, ETHTOOL_TUNABLE_U16, 2)
        + struct.pack("H", 100))
    ifr = struct.pack("16sP", ifname.encode(), ctypes.addressof(data)) + b"\0" * 16
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        fcntl.ioctl(sock, SIOCETHTOOL, ifr)
        return 0
    except OSError as e:
        return -e.errno


print(f"dcbnl_set={dcbnl_set('lo')} ethtool_stunable={ethtool_stunable('lo')}")
