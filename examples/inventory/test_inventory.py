import unittest

from inventory import Inventory, OutOfStock


class InventoryTest(unittest.TestCase):
    def test_restock_and_available(self):
        inv = Inventory()
        inv.restock("apple", 5)
        self.assertEqual(inv.available("apple"), 5)

    def test_reserve_holds_stock(self):
        inv = Inventory()
        inv.restock("apple", 5)
        inv.reserve("apple", 3)
        self.assertEqual(inv.available("apple"), 2)
        with self.assertRaises(OutOfStock):
            inv.reserve("apple", 3)

    def test_commit_ships_reserved_units(self):
        inv = Inventory()
        inv.restock("apple", 5)
        inv.reserve("apple", 2)
        inv.commit("apple", 2)
        self.assertEqual(inv.stock["apple"], 3)
        self.assertEqual(inv.available("apple"), 3)


if __name__ == "__main__":
    unittest.main()
