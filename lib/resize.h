#ifndef RF_RESIZE_H
#define RF_RESIZE_H
#endif
