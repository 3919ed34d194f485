/*
 * The one version of every usbgw program.  contrib/debian/changelog's
 * top entry must say the same (127-deb-package checks the programs'
 * -V against the package version).
 */
#ifndef USBGW_VERSION_H
#define USBGW_VERSION_H

#define USBGW_VERSION	"0.1"

#endif
