/* Stub of <objc/message.h>: with OBJC_OLD_DISPATCH_PROTOTYPES=0 (the arm64 default),
 * objc_msgSend must be cast to the exact function type of each call. */
#ifndef AF_STUB_OBJC_MESSAGE_H
#define AF_STUB_OBJC_MESSAGE_H
#include <objc/runtime.h>
void objc_msgSend(void);
#endif
